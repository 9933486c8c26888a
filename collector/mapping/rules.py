"""Vocabulary of the mapping tables: one :class:`Rule` per (raw family -> canonical family) edge.

Why tables and not code: every engine renames metrics between versions (vLLM alone renamed
three families in a year).  Keeping each engine's knowledge in a flat, declarative table makes
"what does ``sglang:token_usage`` become" answerable by reading one line, and lets the plan
builder (:mod:`collector.mapping.plan`) stay engine-agnostic.

Label handling, per engine (:class:`LabelPolicy`):

* ``rename``: engine spelling -> canonical spelling (``model_name`` -> ``model``, dcgm ``UUID`` ->
  ``uuid``...).  A raw label already holding the canonical name is kept as ``exported_<name>``.
* ``drop``: labels that only fragment a canonical series; series differing only in them are
  **summed** (vLLM ``engine`` = data-parallel engine-core index, ``finished_reason`` once turned
  into ``outcome``; dcgm driver-version/info labels; TGI ``err``...).
* ``dedupe``: labels whose series repeat one value (SGLang ``tp_rank``/``pp_rank``/
  ``moe_ep_rank``: every tensor-parallel rank may report the same scheduler state); series
  differing only in them are **averaged** before the sum, so TP=8 does not count 8 times.
* labels with an empty value are dropped (Prometheus treats ``x=""`` as absent).
* everything else is kept: it identifies the series (``le``, ``gpu``, target labels...).

A rule's ``agg`` says how the kept series of one canonical key combine: ``sum`` (counts,
counters), ``mean`` (ratios such as KV-cache usage across data-parallel ranks), or ``num`` /
``den`` for a ratio computed from two raw series (TensorRT-LLM used / max KV blocks).  A
negative ``scale`` subtracts (SGLang success = all - aborted); a canonical series is only
emitted when at least one positive contribution is present.  ``rank`` orders aliases: when a
lower-rank source of the same canonical series is present in a scrape, higher ranks (deprecated
names) are ignored, so a vLLM exporting both old and new names is not counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Agg = Literal["sum", "mean", "num", "den"]
Extra = tuple[tuple[str, str], ...]
# Given the raw labels, the labels to add (e.g. outcome) or None: this raw series does not map.
Select = Callable[[Mapping[str, str]], Extra | None]


@dataclass(frozen=True, slots=True)
class Rule:
    target: str  # canonical name; for histograms the family name (suffixes are added)
    scale: float = 1.0  # raw unit -> canonical unit; histograms: applied to _sum and to le
    histogram: bool = False
    agg: Agg = "sum"
    select: Select | None = None
    rank: int = 0  # alias precedence: 0 = current name, 1 = deprecated name
    only: str = ""  # histograms: map just this raw suffix ("_sum") onto ``target`` itself
    # A raw 0 means "no sensor", not a reading (dcgm-exporter's MEMORY_TEMP on GPUs without an
    # HBM temperature sensor): such samples are not mapped, like blank sentinels.
    zero_is_blank: bool = False


def H(target: str, scale: float = 1.0, rank: int = 0) -> Rule:
    """A histogram rule: raw ``<name>_bucket|_sum|_count`` -> ``<target>_bucket|_sum|_count``."""
    return Rule(target, scale, histogram=True, rank=rank)


def HSum(target: str) -> Rule:
    """A histogram's ``_sum`` alone as a counter (TGI token-length histograms -> token totals)."""
    return Rule(target, histogram=True, only="_sum")


@dataclass(frozen=True, slots=True)
class LabelPolicy:
    rename: Mapping[str, str] = field(default_factory=dict)
    drop: frozenset[str] = frozenset()
    drop_prefixes: tuple[str, ...] = ()
    dedupe: frozenset[str] = frozenset()

    def discards(self, label: str) -> bool:
        return label in self.drop or label in self.dedupe or label.startswith(self.drop_prefixes)


@dataclass(frozen=True, slots=True)
class EngineRules:
    """One engine's table: raw family name -> rules, plus how its labels are treated."""

    families: Mapping[str, tuple[Rule, ...]]
    policy: LabelPolicy
    blank_sentinels: bool = False  # dcgm: drop DCGM "blank" values (unsupported field)

    def lookup(self, name: str) -> tuple[tuple[Rule, ...], str]:
        """Rules for a raw sample name and the histogram suffix it carried ("" for none)."""
        rules = self.families.get(name)
        if rules and not rules[0].histogram:
            return rules, ""
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix):
                rules = self.families.get(name[: -len(suffix)])
                if rules and rules[0].histogram:
                    return rules, suffix
        return (), ""


# --- select helpers -------------------------------------------------------------------------


def const(**labels: str) -> Select:
    """Always map, adding ``labels``."""
    extra: Extra = tuple(sorted(labels.items()))

    def select(_: Mapping[str, str]) -> Extra | None:
        return extra

    return select


def when(label: str, value: str, **labels: str) -> Select:
    """Map only the series whose ``label`` equals ``value``; add ``labels``."""
    extra: Extra = tuple(sorted(labels.items()))

    def select(raw: Mapping[str, str]) -> Extra | None:
        return extra if raw.get(label) == value else None

    return select


def outcome_by(label: str, table: Mapping[str, str], default: str | None = None) -> Select:
    """``outcome`` from a raw label's value; values not in ``table`` map to ``default``
    (None: the series is not counted)."""

    def select(raw: Mapping[str, str]) -> Extra | None:
        value = raw.get(label)
        outcome = table.get(value, default) if value is not None else default
        return None if outcome is None else (("outcome", outcome),)

    return select


def http_5xx(raw: Mapping[str, str]) -> Extra | None:
    """HTTP server errors: prometheus-fastapi-instrumentator groups codes as ``5xx``; exact
    codes (``503``) are accepted too."""
    status = raw.get("status", "")
    return () if len(status) == 3 and status[0] == "5" else None
