"""The head's blocks: samples sorted by (series, time) with each series' id kept once, and
the merges that build them (by counting where ids are dense, else a sort). See
:mod:`store.head` for how the head uses them."""

from __future__ import annotations

import numpy as np

from store.flat_runs import spread
from store.types import Float64Array, Int64Array

_FANIN = 8  # blocks of one size class merged at once
_BASE = 1 << 16  # samples: blocks below _FANIN * _BASE are all of the smallest class
_COUNTING_MIN_RUN = 64  # samples a run on average: below, a sort beats counting's per-run numpy calls

Run = tuple[Int64Array, Int64Array, Int64Array, Float64Array]  # usid, offs, ts, val (see _Block)


def _csr(sid: Int64Array) -> tuple[Int64Array, Int64Array]:
    """(distinct ids, offsets) of ids sorted ascending: id usid[k] owns [offs[k], offs[k+1])."""
    n = len(sid)
    if n == 0:
        return np.empty(0, np.int64), np.zeros(1, np.int64)
    starts = np.flatnonzero(np.append(True, sid[1:] != sid[:-1]))
    return sid[starts], np.append(starts, n).astype(np.int64)


def ids_of(usid: Int64Array, offs: Int64Array, lo: int, hi: int) -> Int64Array:
    """The id of every sample of the series at positions [lo, hi) of a block (a new array)."""
    return np.repeat(usid[lo:hi], np.diff(offs[lo : hi + 1]))


class _Block:
    """Samples sorted by (sid, ts). The ids are kept once per series, not per sample (``usid``
    and ``offs``, as in a CSR matrix): a third less memory than an id column.
    ``key()`` = (sid << 42) | ts per sample, built only when a read cuts through the block."""

    __slots__ = ("usid", "offs", "ts", "val", "min_ts", "max_ts", "_key")

    def __init__(self, usid: Int64Array, offs: Int64Array, ts: Int64Array, val: Float64Array) -> None:
        self.usid, self.offs, self.ts, self.val = usid, offs, ts, val
        self.min_ts = int(ts.min()) if len(ts) else 0
        self.max_ts = int(ts.max()) if len(ts) else -1
        self._key: Int64Array | None = None

    @classmethod
    def of(cls, sid: Int64Array, ts: Int64Array, val: Float64Array) -> _Block:
        return cls(*_csr(sid), ts, val)

    def __len__(self) -> int:
        return len(self.ts)

    def run(self) -> Run:
        return self.usid, self.offs, self.ts, self.val

    def sid(self) -> Int64Array:
        """The id of every sample (a new array)."""
        return np.repeat(self.usid, np.diff(self.offs))

    def series(self, lo: int, hi: int) -> tuple[Int64Array, Int64Array, Float64Array]:
        """(id, timestamp, value) of every sample of the series at positions [lo, hi)."""
        a, b = int(self.offs[lo]), int(self.offs[hi])
        return ids_of(self.usid, self.offs, lo, hi), self.ts[a:b], self.val[a:b]

    def part(self, lo: int, hi: int) -> Run:
        """The series at positions [lo, hi) as a run of their own (views, not copies)."""
        a, b = int(self.offs[lo]), int(self.offs[hi])
        return self.usid[lo:hi], self.offs[lo : hi + 1] - a, self.ts[a:b], self.val[a:b]

    def segments(self, sids: Int64Array) -> tuple[Int64Array, Int64Array]:
        """[lo, hi) of each id's samples; an absent id gets lo == hi at its sorted place."""
        usid = self.usid
        idx = np.searchsorted(usid, sids, side="left")
        lo = self.offs[idx]
        hi = lo.copy()
        if len(usid):
            found = (idx < len(usid)) & (usid[np.minimum(idx, len(usid) - 1)] == sids)
            hi[found] = self.offs[idx[found] + 1]
        return lo, hi

    def firsts(self) -> Int64Array:
        """Each series' oldest timestamp in the block (``usid`` order)."""
        return self.ts[self.offs[:-1]]

    def slices(self, sids: Int64Array, start_ms: int, end_ms: int) -> tuple[Int64Array, Int64Array, Float64Array]:
        """(count per id, timestamps, values) of ``sids``' samples in [start, end], id after id."""
        if self.min_ts >= start_ms and self.max_ts <= end_ms:  # the whole block is inside
            lo, hi = self.segments(sids)
        else:
            key, base = self.key(), sids << 42
            lo = np.searchsorted(key, base | max(start_ms, 0), side="left")
            hi = np.searchsorted(key, base | max(end_ms + 1, 0), side="left")
        counts = hi - lo
        if len(sids) == 1:
            a = int(lo[0])
            return counts, self.ts[a : a + int(counts[0])].copy(), self.val[a : a + int(counts[0])].copy()
        index = spread(lo, counts)
        return counts, self.ts[index], self.val[index]

    @property
    def nbytes(self) -> int:
        arrays = (self.usid, self.offs, self.ts, self.val, self._key)
        return sum(a.nbytes for a in arrays if a is not None)

    def key(self) -> Int64Array:
        # timestamps are below 2**42 ms (year 2109) and ids below 2**21
        if self._key is None:
            self._key = (self.sid() << 42) | np.maximum(self.ts, 0)
        return self._key


def _level(n: int) -> int:
    level = 0
    while n >= _BASE * _FANIN:
        n //= _FANIN
        level += 1
    return level


def slice_end(offs: Int64Array, lo: int, budget: int) -> int:
    """The end of a slice of series positions that starts at ``lo`` (``offs``: where each
    series' samples start, as in :class:`_Block`): the first series boundary at least
    ``budget`` samples on, or the last; at least one series (which may exceed it)."""
    hi = int(np.searchsorted(offs, int(offs[lo]) + budget, side="left"))
    return min(max(hi, lo + 1), len(offs) - 1)


def series_slices(offs: Int64Array, budget: int) -> list[tuple[int, int]]:
    """Ranges [lo, hi) of series positions of about ``budget`` samples each (see :func:`slice_end`)."""
    out: list[tuple[int, int]] = []
    lo = 0
    while lo < len(offs) - 1:
        hi = slice_end(offs, lo, budget)
        out.append((lo, hi))
        lo = hi
    return out


def _empty_block() -> _Block:
    empty = np.empty(0, np.int64)
    return _Block(empty, np.zeros(1, np.int64), empty.copy(), np.empty(0, np.float64))


def concat_offsets(offs: list[Int64Array]) -> Int64Array:
    """The offsets of blocks' series one after another (each block's ``offs`` moved past the
    samples of the blocks before it)."""
    sizes = np.cumsum([0] + [int(o[-1]) for o in offs])
    return np.concatenate([o[:-1] + base for o, base in zip(offs, sizes.tolist())] + [sizes[-1:]]).astype(np.int64)


def _concat(parts: list[Run]) -> _Block:
    """Runs of consecutive, disjoint id ranges (ascending) as one block: no merge needed."""
    parts = [p for p in parts if len(p[2])]
    if not parts:
        return _empty_block()
    if len(parts) == 1:
        return _Block(*parts[0])
    return _Block(np.concatenate([p[0] for p in parts]), concat_offsets([p[1] for p in parts]),
                  np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts]))


def _merge(parts: list[Run], ordered: bool) -> _Block:
    """One block from runs sorted by (sid, ts). ``ordered``: for every series, the runs' samples
    are in time order run after run, so merging the runs by series alone is enough; otherwise
    a full (series, time) sort."""
    parts = [p for p in parts if len(p[2])]
    if not parts:
        return _empty_block()
    if len(parts) == 1:
        return _Block(*parts[0])
    if ordered:
        n = sum(len(p[2]) for p in parts)
        cap = max(int(p[0][-1]) for p in parts) + 1
        # Counting costs a few passes over every possible id and a few numpy calls per run; a
        # stable argsort of the concatenation costs ~3x more per sample once it holds millions
        # (a seal of 2 M pending samples in ~200 scrape batches: 110 ns a sample sorting).
        if n * len(parts) >= cap and n >= _COUNTING_MIN_RUN * len(parts):
            return _merge_counting(parts, cap)
    sid = np.concatenate([np.repeat(p[0], np.diff(p[1])) for p in parts])
    ts = np.concatenate([p[2] for p in parts])
    val = np.concatenate([p[3] for p in parts])
    order = np.argsort(sid, kind="stable") if ordered else np.lexsort((ts, sid))
    return _Block.of(sid[order], ts[order], val[order])


def _merge_counting(parts: list[Run], cap: int) -> _Block:
    """Merge a few runs sorted by series, run order breaking ties, by counting: ids are dense,
    so every sample's place follows from per-series counts, with no comparison sort (several
    times cheaper than a stable argsort of the concatenation, and no gather)."""
    total = np.zeros(cap, np.int64)
    for usid, offs, ts, _ in parts:
        if len(usid) == len(ts):  # one sample a series (a scrape's batch): no counts to add
            total[usid] += 1
        else:
            total[usid] += np.diff(offs)
    n = int(total.sum())
    out_ts = np.empty(n, np.int64)
    out_val = np.empty(n, np.float64)
    nxt = np.cumsum(total) - total  # where each series' next samples go
    for usid, offs, ts, val in parts:
        if len(usid) == len(ts):
            pos = nxt[usid]
            nxt[usid] += 1
        else:
            counts = np.diff(offs)
            pos = np.repeat(nxt[usid] - offs[:-1], counts) + np.arange(len(ts), dtype=np.int64)
            nxt[usid] += counts
        out_ts[pos] = ts
        out_val[pos] = val
    usid = np.flatnonzero(total).astype(np.int64)
    offs = np.zeros(len(usid) + 1, np.int64)
    np.cumsum(total[usid], out=offs[1:])
    return _Block(usid, offs, out_ts, out_val)
