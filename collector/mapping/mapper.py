"""Compute the canonical series of one scraped batch: dict lookups once, numpy every scrape.

Why it is built this way: mapping runs on every scrape of every target, so its steady state
must cost about what appending does.  A target's batch has the same keys, in the same order,
scrape after scrape; :class:`CanonicalMapper` therefore *compiles* a key list once -- one plan
lookup per key (:mod:`collector.mapping.plan`), alias resolution, group indices -- and keeps
the result, found again by (engine, length, first key, last key) and confirmed by comparing
the lists (the parser and the scrape loop intern keys, so that is pointer comparison).  Per
scrape what is left is fancy indexing and ``np.bincount``:

1. every sample becomes one entry per contribution of its key (``np.repeat``);
2. entries of the same raw series that differ only in *dedupe* labels are averaged;
3. entries of the same canonical key and timestamp are summed (``sum``), averaged (``mean``)
   or divided (``num`` / ``den``); subtractions count only next to a positive contribution.

Values: stale markers (Prometheus's NaN bit pattern, written by the scrape loop for vanished
series) are left out of sums, and a canonical sample all of whose inputs are stale is itself
written as a stale marker, so mapping the assembled batch propagates staleness.  Other NaNs
propagate as NaN.  dcgm "blank" sentinels are treated as absent.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from collector.mapping.detect import Engine, detect_engine
from collector.mapping.plan import (
    BLANK_SENTINELS,
    BLANK_ZERO,
    DEN,
    ENGINE_RULES,
    MEAN,
    NUM,
    OWN,
    RATIO,
    PlanBook,
)
from store.types import STALE_NAN_BITS, Float64Array, Int64Array, SampleBatch, SeriesKey, is_stale_marker

BoolArray = npt.NDArray[np.bool_]
_INT64_BLANK = 9.2233720368547758e18  # DCGM_INT64_BLANK and up: all round to 2**63
_FP64_BLANK = 140737488355328.0  # DCGM_FP64_BLANK (2**47) and the sentinels just above it


def _blank(values: Float64Array) -> BoolArray:
    marked: BoolArray = (values >= _INT64_BLANK) | ((values >= _FP64_BLANK) & (values < _FP64_BLANK + 16))
    return marked


def _split_scale(scale: Float64Array) -> tuple[Float64Array, Float64Array]:
    """Scales as (multiplier, divisor): 1e-6 becomes (1, 1e6), which rounds correctly."""
    with np.errstate(divide="ignore"):
        inverse = np.where(scale != 0, 1.0 / np.abs(scale), 0.0)
    whole = (np.abs(scale) < 1) & (inverse > 1) & (np.abs(inverse - np.round(inverse)) < 1e-6 * inverse)
    multiplier = np.where(whole, np.sign(scale), scale)
    divisor = np.where(whole, np.round(inverse), 1.0)
    return multiplier.astype(np.float64), divisor.astype(np.float64)


def _group(ids: Int64Array, ts: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Group entries by (id, ts): each entry's group, and each group's first entry."""
    combined = ids
    if len(ts) and ts.min() != ts.max():
        stamps, ts_rank = np.unique(ts, return_inverse=True)
        combined = ids * len(stamps) + ts_rank.reshape(-1)
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), first.astype(np.int64)


@dataclass(slots=True)
class _Compiled:
    """One key list's plan, in arrays; contributions are ordered by key position."""

    keys: list[SeriesKey]
    generation: int
    counts: Int64Array  # contributions per key position
    starts: Int64Array  # first contribution of each key position
    slot: Int64Array  # local slot id per contribution
    weight: Float64Array  # value * weight / divisor: a scale below 1 whose inverse is whole
    divisor: Float64Array  # (0.01, 1e-6...) divides, so 87 % -> 0.87 and 98765432 us -> 98.765432 s exactly
    part: Int64Array
    primary: BoolArray  # a positive NUM contribution: may on its own produce a value
    blank: Int64Array
    pre: Int64Array  # local dedupe group id per contribution
    has_dedupe: bool
    slot_keys: npt.NDArray[np.object_]  # local slot id -> canonical SeriesKey
    slot_kinds: Int64Array
    # every key once, at one timestamp: groups known in advance
    static1: tuple[Int64Array, Int64Array] | None = None
    static2: tuple[Int64Array, Int64Array] | None = None


class CanonicalMapper:
    """Maps batches to canonical series; holds the plan caches.  Thread-safe."""

    def __init__(self, max_series: int = 500_000, max_compiled: int = 1024) -> None:
        self.book = PlanBook(max_series)
        self.max_compiled = max_compiled
        self._compiled: dict[tuple[Engine | None, int, SeriesKey, SeriesKey], _Compiled] = {}
        self._lock = threading.Lock()

    def map(self, batch: SampleBatch, engine: Engine | None = None) -> SampleBatch:
        keys = batch.keys
        if not keys or not len(batch) or engine == "unknown":
            return SampleBatch.empty()
        ident = (engine, len(keys), keys[0], keys[-1])
        comp = self._compiled.get(ident)
        same = comp is not None and comp.keys == (keys if isinstance(keys, list) else list(keys))
        if comp is None or not same or comp.generation != self.book.generation:
            with self._lock:
                comp = self._compile(keys, engine)
                if len(self._compiled) >= self.max_compiled:
                    self._compiled.clear()
                self._compiled[ident] = comp
        if not len(comp.slot):
            return SampleBatch.empty()
        return _evaluate(comp, batch)

    def _compile(self, keys: Sequence[SeriesKey], engine: Engine | None) -> _Compiled:
        resolved = detect_engine(k.name for k in keys) if engine is None else engine
        if resolved not in ENGINE_RULES:
            resolved = "unknown"
        book = self.book
        book.reserve(len(keys))
        generation = book.generation
        counts = np.zeros(len(keys), np.int64)
        rows: list[tuple[int, int, float, int, int, int, int, int]] = []
        if resolved != "unknown":
            for pos, key in enumerate(keys):
                for c in book.plan(resolved, key):
                    rows.append((pos, c.slot, c.weight, c.part, c.rank, c.alias, c.pre, c.blank))
        if any(row[4] for row in rows):  # aliases: keep the best-ranked source of each group
            best: dict[int, int] = {}
            for row in rows:
                best[row[5]] = min(best.get(row[5], row[4]), row[4])
            rows = [row for row in rows if row[4] == best[row[5]]]
        for row in rows:
            counts[row[0]] += 1
        columns = list(zip(*rows)) if rows else [()] * 8
        global_slots = np.asarray(columns[1], np.int64)
        used, slot = np.unique(global_slots, return_inverse=True)
        pres = np.asarray(columns[6], np.int64)
        own = pres == OWN
        if own.any():  # ids past every interned one
            pres[own] = (max(int(pres.max()), -1) + 1 + _own_groups(keys, np.asarray(columns[0], np.int64), counts))[own]
        _, pre = np.unique(pres, return_inverse=True)
        weight, divisor = _split_scale(np.asarray(columns[2], np.float64))
        part = np.asarray(columns[3], np.int64)
        slot_keys = np.empty(len(used), dtype=object)
        slot_keys[:] = [book.slot_keys[int(s)] for s in used]
        comp = _Compiled(
            keys=list(keys),
            generation=generation,
            counts=counts,
            starts=np.cumsum(counts) - counts,
            slot=slot.reshape(-1).astype(np.int64),
            weight=weight,
            divisor=divisor,
            part=part,
            primary=(part == NUM) & (weight > 0),
            blank=np.asarray(columns[7], np.int64),
            pre=pre.reshape(-1).astype(np.int64),
            has_dedupe=len(np.unique(pres)) < len(pres),
            slot_keys=slot_keys,
            slot_kinds=np.asarray([book.slot_kinds[int(s)] for s in used], np.int64),
        )
        n = len(comp.slot)
        zeros = np.zeros(n, np.int64)
        if comp.has_dedupe:
            comp.static1 = _group(comp.pre, zeros)
            firsts = comp.static1[1]
            comp.static2 = _group(comp.slot[firsts], zeros[: len(firsts)])
        else:
            comp.static2 = _group(comp.slot, zeros)
        return comp


def _own_groups(keys: Sequence[SeriesKey], pos: Int64Array, counts: Int64Array) -> Int64Array:
    """A dedupe group id for each contribution (at key position ``pos``) where nothing groups:
    its own, shared only with the same contribution of an equal key (a key list that names one
    series twice averages it, as an interned group id did)."""
    first: dict[SeriesKey, int] = {}
    canon = np.fromiter((first.setdefault(k, i) for i, k in enumerate(keys)), np.int64, len(keys))
    starts = np.cumsum(counts) - counts
    nth = np.arange(len(pos), dtype=np.int64) - starts[pos]
    return canon[pos] * int(counts.max()) + nth


def _evaluate(comp: _Compiled, batch: SampleBatch) -> SampleBatch:
    key_index = np.asarray(batch.key_index, np.int64)
    values = np.asarray(batch.values, np.float64)
    ts_all = np.asarray(batch.ts_ms, np.int64)
    one_ts = bool(ts_all.min() == ts_all.max())
    static = (
        one_ts and len(key_index) == len(comp.keys) and np.array_equal(key_index, np.arange(len(key_index)))
    )
    if static:
        ent = np.arange(len(comp.slot), dtype=np.int64)
        sample = np.repeat(key_index, comp.counts)
    else:
        reps = comp.counts[key_index]
        sample = np.repeat(np.arange(len(key_index), dtype=np.int64), reps)
        offsets = np.arange(len(sample), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
        ent = np.repeat(comp.starts[key_index], reps) + offsets
    if not len(ent):
        return SampleBatch.empty()
    v = values[sample]
    ts = ts_all[sample]
    stale = is_stale_marker(v)
    blank = comp.blank[ent]
    live = ~stale & ~(((blank & BLANK_SENTINELS) > 0) & _blank(v)) & ~(((blank & BLANK_ZERO) > 0) & (v == 0))

    # stage 1: average each raw series over its dedupe labels -- and over repeats of one series
    # at one timestamp, which only a batch that is not one-sample-per-key can hold
    if comp.has_dedupe or not static:
        inv1, first1 = comp.static1 if static and comp.static1 else _group(comp.pre[ent], ts)
        n1 = np.bincount(inv1, weights=live, minlength=len(first1))
        s1 = np.bincount(inv1, weights=np.where(live, v, 0.0), minlength=len(first1))
        st1 = np.bincount(inv1, weights=stale, minlength=len(first1))
        with np.errstate(invalid="ignore", divide="ignore"):
            v = np.where(n1 > 0, s1 / np.maximum(n1, 1.0), 0.0)
        live, stale = n1 > 0, (n1 == 0) & (st1 > 0)
        ent, ts = ent[first1], ts[first1]

    slot = comp.slot[ent]
    if static and comp.static2 is not None:
        inv2, first2 = comp.static2
    else:
        inv2, first2 = _group(slot, ts)
    g_slot, g_ts, size = slot[first2], ts[first2], len(first2)
    part = comp.part[ent]
    with np.errstate(over="ignore"):  # a raw value near the float limit times a unit scale is +-Inf, as it should be
        x = np.where(live, v, 0.0) * comp.weight[ent] / comp.divisor[ent]  # stale NaNs never enter arithmetic
    is_num = part == NUM
    num = np.bincount(inv2, weights=np.where(is_num, x, 0.0), minlength=size)
    den = np.bincount(inv2, weights=np.where(is_num, 0.0, x), minlength=size)
    n_primary = np.bincount(inv2, weights=live & comp.primary[ent], minlength=size)
    n_den = np.bincount(inv2, weights=live & (part == DEN), minlength=size)
    n_live = np.bincount(inv2, weights=live, minlength=size)
    n_stale = np.bincount(inv2, weights=stale, minlength=size)
    kind = comp.slot_kinds[g_slot]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(kind == MEAN, num / np.maximum(n_primary, 1.0), num)
        out = np.where(kind == RATIO, np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan), out)
    emit = (n_primary > 0) & ((kind != RATIO) | (n_den > 0))
    stale_out = (n_live == 0) & (n_stale > 0)
    out = np.ascontiguousarray(out, np.float64)
    out.view(np.uint64)[stale_out] = np.uint64(STALE_NAN_BITS)
    keep = np.flatnonzero(emit | stale_out)
    out_slots = g_slot[keep]
    if one_ts:  # one sample per canonical key
        keys: list[SeriesKey] = comp.slot_keys[out_slots].tolist()
        index = np.arange(len(keep), dtype=np.int64)
    else:
        distinct, inverse = np.unique(out_slots, return_inverse=True)
        keys = comp.slot_keys[distinct].tolist()
        index = inverse.reshape(-1).astype(np.int64)
    return SampleBatch(keys, index, g_ts[keep].astype(np.int64), out[keep])


_DEFAULT = CanonicalMapper()


def to_canonical(batch: SampleBatch, engine: Engine | None = None) -> SampleBatch:
    """The canonical series computed from ``batch`` (raw series are not included: the caller
    appends both).  ``engine=None`` detects the engine from the batch's metric names;
    ``"unknown"`` (given or detected) yields an empty batch."""
    return _DEFAULT.map(batch, engine)
