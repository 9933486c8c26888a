"""Per-series mapping plan: what one raw :class:`SeriesKey` contributes to which canonical key.

Why a plan per key: a target returns the same series on every scrape, so the work of reading
the rule table, rewriting labels and building the canonical key is done once per raw key and
remembered.  A plan is a tuple of :class:`Contribution` (empty: the series maps to nothing),
each naming integer ids -- of the canonical key ("slot"), of its alias group and of its
dedupe group -- so the per-scrape arithmetic in :mod:`collector.mapping.mapper` is integer
indexing and ``np.bincount``, never string work.

Ids are interned in one :class:`PlanBook`; it is bounded (cleared as a whole, together with
everything compiled from it, when it grows past ``max_series``) so label churn cannot grow it
without limit.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from collector.mapping.detect import KnownEngine
from collector.mapping.rules import EngineRules, Rule
from collector.mapping.rules_gpu import DCGM
from collector.mapping.rules_inference import SGLANG, TGI, TRITON, VLLM
from store.types import SeriesKey

ENGINE_RULES: dict[KnownEngine, EngineRules] = {
    "vllm": VLLM,
    "sglang": SGLANG,
    "tgi": TGI,
    "triton": TRITON,
    "dcgm": DCGM,
}

# engines with a rule that ranks below another (aliases to choose between)
RANKED = {engine: any(rule.rank for table in rules.families.values() for rule in table)
          for engine, rules in ENGINE_RULES.items()}
OWN = -1  # Contribution.alias / .pre: a group of its own (see PlanBook._build)
SUM, MEAN, RATIO = 0, 1, 2  # slot kinds: how a canonical key's contributions combine
NUM, DEN = 0, 1  # contribution parts
BLANK_SENTINELS, BLANK_ZERO = 1, 2  # Contribution.blank bits
_KIND = {"sum": SUM, "mean": MEAN, "num": RATIO, "den": RATIO}


class Contribution(NamedTuple):
    slot: int  # canonical key id
    weight: float  # unit scale, negative to subtract
    part: int  # NUM or DEN
    rank: int  # alias precedence (0 wins)
    alias: int  # alias group id: canonical family + labels without le (OWN: not ranked)
    pre: int  # dedupe group id: raw series minus dedupe labels, per rule (OWN: no dedupe labels)
    blank: int  # BLANK_SENTINELS: check for DCGM blank sentinels; BLANK_ZERO: a raw 0 is absent too


def scale_le(text: str, scale: float) -> str | None:
    """A bucket bound in raw units as canonical text; None when it is not a number."""
    if scale == 1.0:
        return text
    try:
        bound = Decimal(text.strip()) * Decimal(repr(scale))
    except InvalidOperation:
        return None
    if bound.is_nan():
        return None
    value = float(bound)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def canonical_labels(
    raw: dict[str, str], rules: EngineRules, engine: str, extra: tuple[tuple[str, str], ...]
) -> dict[str, str]:
    """Raw labels rewritten by the engine's policy, plus ``extra`` and ``engine``."""
    policy = rules.policy
    out: dict[str, str] = {}
    renamed: dict[str, str] = {}
    for name, value in raw.items():
        if not value or policy.discards(name):
            continue
        target = policy.rename.get(name)
        if target is None:
            out[name] = value
        else:
            renamed[target] = value
    for name, value in renamed.items():
        if name in out:  # a raw label already had the canonical name: keep it aside
            out[f"exported_{name}"] = out.pop(name)
        out[name] = value
    if "engine" in out:
        out["exported_engine"] = out.pop("engine")
    out.update(extra)
    out["engine"] = engine
    return out


class PlanBook:
    """Interned slots / alias groups / dedupe groups and the per-key plans built from them."""

    def __init__(self, max_series: int = 500_000) -> None:
        self.max_series = max_series
        self.generation = 0  # bumped by clear(): compiled plans of older generations are void
        self.slot_keys: list[SeriesKey] = []
        self.slot_kinds: list[int] = []
        self._slots: dict[SeriesKey, int] = {}
        self._groups: dict[tuple[object, ...], int] = {}
        self._plans: dict[tuple[KnownEngine, SeriesKey], tuple[Contribution, ...]] = {}
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}

    def clear(self) -> None:
        self.generation += 1
        self.slot_keys, self.slot_kinds = [], []
        self._slots.clear()
        self._groups.clear()
        self._plans.clear()
        self._pairs.clear()

    def reserve(self, n: int) -> None:
        """Make room for ``n`` more plans: clears the book when it would pass ``max_series``
        (called before planning a key list, never in the middle of one)."""
        if self._plans and len(self._plans) + n > self.max_series:
            self.clear()

    def plan(self, engine: KnownEngine, key: SeriesKey) -> tuple[Contribution, ...]:
        found = self._plans.get((engine, key))
        if found is None:
            found = self._plans[(engine, key)] = self._build(engine, key)
        return found

    def _slot(self, key: SeriesKey, kind: int) -> int:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = len(self.slot_keys)
            self.slot_keys.append(key)
            self.slot_kinds.append(kind)
        return slot

    def _group(self, ident: tuple[object, ...]) -> int:
        return self._groups.setdefault(ident, len(self._groups))

    def _build(self, engine: KnownEngine, key: SeriesKey) -> tuple[Contribution, ...]:
        rules = ENGINE_RULES[engine]
        matched, suffix = rules.lookup(key.name)
        if not matched:
            return ()
        raw = dict(key.labels)
        dedupe = rules.policy.dedupe
        # OWN where nothing groups: without dedupe labels each contribution is its own dedupe
        # group, and without ranked rules no alias group is read. Interning those ids anyway
        # kept a tuple or two and a dict entry for every raw series (~250 bytes).
        pre_labels = tuple(item for item in key.labels if item[0] not in dedupe) if dedupe else ()
        ranked = RANKED[engine]
        out: list[Contribution] = []
        for index, rule in enumerate(matched):
            built = self._contribution(engine, rules, rule, key.name, raw, suffix)
            if built is None:
                continue
            ckey, weight = built
            # canonical keys repeat the same few label pairs: share them rather than copy them
            ckey = SeriesKey(ckey.name, tuple([self._pairs.setdefault(p, p) for p in ckey.labels]))
            out.append(
                Contribution(
                    slot=self._slot(ckey, _KIND[rule.agg]),
                    weight=weight,
                    part=DEN if rule.agg == "den" else NUM,
                    rank=rule.rank,
                    alias=self._group(("alias", rule.target, tuple(i for i in ckey.labels if i[0] != "le")))
                    if ranked else OWN,
                    pre=self._group(("pre", index, key.name, pre_labels)) if dedupe else OWN,
                    blank=(BLANK_SENTINELS if rules.blank_sentinels else 0) | (BLANK_ZERO if rule.zero_is_blank else 0),
                )
            )
        return tuple(out)

    @staticmethod
    def _contribution(
        engine: str, rules: EngineRules, rule: Rule, name: str, raw: dict[str, str], suffix: str
    ) -> tuple[SeriesKey, float] | None:
        if rule.only and suffix != rule.only:
            return None
        extra = rule.select(raw) if rule.select is not None else ()
        if extra is None:
            return None
        labels = canonical_labels(raw, rules, engine, extra)
        labels.pop("le", None)
        if suffix == "_bucket" and not rule.only:
            le = scale_le(raw.get("le", ""), rule.scale)
            if not le:
                return None
            labels["le"] = le
        target = rule.target if rule.only else rule.target + suffix
        weight = rule.scale if suffix in ("", "_sum") else 1.0
        return SeriesKey(target, tuple(labels.items())), weight
