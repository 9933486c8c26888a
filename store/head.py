"""The head: the recent window of every series, in memory, in numpy columns.

Samples arrive as sorted columnar batches (series id, timestamp, value). Appending is O(batch):
the batch is parked in a pending list. Reads first *compact*: pending batches are merged into
one block sorted by (series id, timestamp), after which a series is a contiguous slice found by
binary search. Scrapes arrive in time order, so the merge is a stable sort of a few sorted runs.

Per-series bookkeeping lives in arrays indexed by series id (ids are dense database ids):

* ``last_ts`` / ``last_bits``   newest sample, for out-of-order and duplicate checks;
* ``flushed_until``             every sample below this is in a chunk (exclusive bound);
* ``head_start``                the head holds every sample of the series at or after this.

Invariant the reader relies on: ``head_start <= flushed_until``, so chunks (below
``flushed_until``) and head (from ``head_start``) together cover the whole series.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from store.types import Float64Array, Int64Array

NEVER = np.iinfo(np.int64).min


class Head:
    def __init__(self) -> None:
        self.last_ts: Int64Array = np.empty(0, np.int64)
        self.last_bits: npt.NDArray[np.uint64] = np.empty(0, np.uint64)
        self.flushed_until: Int64Array = np.empty(0, np.int64)
        self.head_start: Int64Array = np.empty(0, np.int64)
        self._sid: Int64Array = np.empty(0, np.int64)
        self._ts: Int64Array = np.empty(0, np.int64)
        self._val: Float64Array = np.empty(0, np.float64)
        self._pending: list[tuple[Int64Array, Int64Array, Float64Array]] = []
        self._pending_ordered = True
        self._key: Int64Array | None = None  # (sid << 42) | ts of the compacted block, built on demand
        self.samples = 0

    # -- bookkeeping -----------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return len(self.last_ts)

    def ensure_capacity(self, max_sid: int) -> None:
        """Grow the per-series arrays so that ``max_sid`` is a valid index."""
        if max_sid < self.capacity:
            return
        size = max(max_sid + 1, self.capacity * 2, 1024)
        grow = size - self.capacity
        self.last_ts = np.concatenate([self.last_ts, np.full(grow, NEVER, np.int64)])
        self.last_bits = np.concatenate([self.last_bits, np.zeros(grow, np.uint64)])
        self.flushed_until = np.concatenate([self.flushed_until, np.full(grow, NEVER, np.int64)])
        self.head_start = np.concatenate([self.head_start, np.full(grow, NEVER, np.int64)])

    # -- writes ----------------------------------------------------------------------------
    def add(self, sid: Int64Array, ts: Int64Array, val: Float64Array) -> None:
        """Add validated samples sorted by (sid, ts); updates the newest sample per series."""
        if len(sid) == 0:
            return
        self.ensure_capacity(int(sid[-1]))
        if self._pending_ordered and bool(np.any(ts < self.last_ts[sid])):
            # An out-of-order sample: the cheap stable merge is no longer enough.
            self._pending_ordered = False
        self._pending.append((sid, ts, val))
        self.samples += len(sid)
        last = np.flatnonzero(np.append(sid[1:] != sid[:-1], True))
        newer = ts[last] > self.last_ts[sid[last]]
        last = last[newer]
        self.last_ts[sid[last]] = ts[last]
        self.last_bits[sid[last]] = val[last].view(np.uint64)

    def compact(self) -> None:
        if not self._pending:
            return
        sid = np.concatenate([self._sid, *(p[0] for p in self._pending)])
        ts = np.concatenate([self._ts, *(p[1] for p in self._pending)])
        val = np.concatenate([self._val, *(p[2] for p in self._pending)])
        if self._pending_ordered:
            order = np.argsort(sid, kind="stable")
        else:
            order = np.lexsort((ts, sid))
        self._sid, self._ts, self._val = sid[order], ts[order], val[order]
        self._key = None
        self._pending = []
        self._pending_ordered = True

    # -- reads -----------------------------------------------------------------------------
    def bounds(self, sids: Int64Array) -> tuple[Int64Array, Int64Array]:
        """[lo, hi) positions of each series' samples in the compacted block."""
        self.compact()
        return (
            np.searchsorted(self._sid, sids, side="left"),
            np.searchsorted(self._sid, sids, side="right"),
        )

    def window(self, sids: Int64Array, start_ms: int, end_ms: int) -> tuple[Int64Array, Int64Array, Int64Array, Float64Array]:
        """Samples of ``sids`` with start <= ts <= end, without a per-series loop: (segment
        starts, segment counts, ts, values), segment i belonging to ``sids[i]``.

        One binary search over a composite (series, time) key finds every series' window at
        once; timestamps are below 2**42 ms (year 2109) and ids below 2**21.
        """
        self.compact()
        if self._key is None:
            self._key = (self._sid << 42) | np.maximum(self._ts, 0)
        base = sids.astype(np.int64) << 42
        lo = np.searchsorted(self._key, base | max(start_ms, 0), side="left")
        hi = np.searchsorted(self._key, base | max(end_ms + 1, 0), side="left")
        counts = hi - lo
        starts = np.zeros(len(sids), np.int64)
        if len(sids) > 1:
            np.cumsum(counts[:-1], out=starts[1:])
        total = int(counts.sum())
        # positions lo[i] .. hi[i]-1 for every i, as one index array
        index = np.arange(total, dtype=np.int64) - np.repeat(starts - lo, counts)
        return starts, counts, self._ts[index], self._val[index]

    def columns(self) -> tuple[Int64Array, Int64Array, Float64Array]:
        """The compacted block: (sid, ts, value), sorted by (sid, ts)."""
        self.compact()
        return self._sid, self._ts, self._val

    def series(self, sid: int, start_ms: int = NEVER, end_ms: int = 2**62) -> tuple[Int64Array, Float64Array]:
        lo, hi = self.bounds(np.asarray([sid], np.int64))
        ts = self._ts[lo[0] : hi[0]]
        val = self._val[lo[0] : hi[0]]
        a, b = np.searchsorted(ts, [start_ms, end_ms + 1])
        return ts[a:b], val[a:b]

    def value_at(self, sid: int, ts_ms: int) -> float | None:
        ts, val = self.series(sid, ts_ms, ts_ms)
        return float(val[0]) if len(ts) else None

    def bits_at(self, sid: int, ts_ms: int) -> int | None:
        ts, val = self.series(sid, ts_ms, ts_ms)
        return int(val[:1].view(np.uint64)[0]) if len(ts) else None

    # -- flushing --------------------------------------------------------------------------
    def unflushed_below(self, cutoff: Int64Array) -> tuple[Int64Array, Int64Array, Float64Array]:
        """Samples with flushed_until[sid] <= ts < cutoff[sid], sorted by (sid, ts)."""
        sid, ts, val = self.columns()
        if len(sid) == 0:
            return sid, ts, val
        mask = (ts < cutoff[sid]) & (ts >= self.flushed_until[sid])
        return sid[mask], ts[mask], val[mask]

    def unflushed(self) -> tuple[Int64Array, Int64Array, Float64Array]:
        sid, ts, val = self.columns()
        mask = ts >= self.flushed_until[sid] if len(sid) else np.zeros(0, bool)
        return sid[mask], ts[mask], val[mask]

    def mark_flushed(self, sids: Int64Array, cutoff: Int64Array) -> None:
        self.flushed_until[sids] = np.maximum(self.flushed_until[sids], cutoff[sids])

    def trim(self, keep_from: Int64Array) -> int:
        """Drop flushed samples older than ``keep_from[sid]``; returns how many were dropped."""
        sid, ts, val = self.columns()
        if len(sid) == 0:
            return 0
        bound = np.minimum(keep_from, self.flushed_until)
        keep = ts >= bound[sid]
        dropped = int(len(keep) - np.count_nonzero(keep))
        if dropped:
            self._sid, self._ts, self._val = sid[keep], ts[keep], val[keep]
            self._key = None
            self.samples -= dropped
        touched = bound > self.head_start
        self.head_start[touched] = bound[touched]
        return dropped

