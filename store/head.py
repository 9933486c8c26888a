"""The head: the recent window of every series, in memory, in numpy columns.

Samples arrive as sorted columnar batches (series id, timestamp, value). Appending is O(batch):
the batch is parked in a pending list. A read first *seals* the pending batches into a block
sorted by (series id, timestamp) and then searches every block that overlaps its time window;
a series' samples are one contiguous slice per block, and since the blocks are in append order
(and appends in time order) those slices, block after block, are the series in time order.

Why blocks, and not one compacted block: with a hundred targets scraped every second the head
holds tens of millions of samples, and rules and cost reads come several times a second.
Merging the pending samples into one big sorted block on every read cost a pass over the whole
head per read -- the largest single cost of a busy service. Blocks are merged size-tiered
instead (the newest ``_FANIN`` blocks of the same size class become one, by counting rather
than sorting: ids are dense), so a sample is merged a few times in its life and a read searches
a dozen blocks or so. Anything that needs the head as one block (checkpoints, trimming) merges
everything once (:meth:`compact`). A block keeps each series' id once, with the offsets of its
samples (16 bytes a sample instead of 24); pending batches are sealed without waiting for a
read once they hold ``_SEAL_PENDING`` samples.

An out-of-order sample (inside the out-of-order window) breaks "later block, later samples";
the next read then merges everything with a full (series, time) sort, as the store did before.

Per-series bookkeeping lives in arrays indexed by series id (ids are dense database ids):

* ``last_ts`` / ``last_bits``   newest sample, for out-of-order and duplicate checks;
* ``flushed_until``             every sample below this is in a chunk (exclusive bound);
* ``head_start``                the head holds every sample of the series at or after this;
* ``first_ts``                  no sample of the series in the head is older than this (a lower
                                bound, exact after a trim): lets a checkpoint see cheaply that
                                it has nothing to do.

Invariant the reader relies on: ``head_start <= flushed_until``, so chunks (below
``flushed_until``) and head (from ``head_start``) together cover the whole series.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from store.head_blocks import _FANIN, Run, _Block, _csr, _level, _merge
from store.types import Float64Array, Int64Array

NEVER = np.iinfo(np.int64).min
EMPTY = np.iinfo(np.int64).max  # first_ts of a series without samples in the head

_SEAL_PENDING = 2_000_000  # samples waiting for a read before they are sealed all the same
_MAX_BLOCKS = 48  # past this, merge everything (only odd size sequences get here)
_OFFLOAD_PENDING = 3 * _SEAL_PENDING  # pending past this is sealed inline: the merging thread lags


class Frozen:
    """The head's blocks and pending batches at one moment. Neither is ever changed in place
    (seals, merges and trims build new ones), so a checkpoint can merge them off the store's
    lock while appends go on."""

    __slots__ = ("blocks", "pending", "ordered")

    def __init__(self, blocks: tuple[_Block, ...], pending: tuple[tuple[Int64Array, Int64Array, Float64Array], ...],
                 ordered: bool) -> None:
        self.blocks, self.pending, self.ordered = blocks, pending, ordered

    def merged(self) -> _Block:
        return _merge([b.run() for b in self.blocks] + [(*_csr(sid), ts, val) for sid, ts, val in self.pending],
                      self.ordered)


@dataclass(frozen=True)
class SealWork:
    """A merge taken from the head to run off the store's lock: the pending batches into a
    block, or a run of blocks of one size class into one (never both)."""

    pending: tuple[tuple[Int64Array, Int64Array, Float64Array], ...] = ()
    blocks: tuple[_Block, ...] = ()

    def merge(self) -> _Block:
        """The merged block (needs no lock: what it reads is never changed in place)."""
        if self.pending:
            return _merge([(*_csr(sid), ts, val) for sid, ts, val in self.pending], True)
        return _merge([b.run() for b in self.blocks], True)


class Head:
    def __init__(self) -> None:
        self.last_ts: Int64Array = np.empty(0, np.int64)
        self.last_bits: npt.NDArray[np.uint64] = np.empty(0, np.uint64)
        self.flushed_until: Int64Array = np.empty(0, np.int64)
        self.head_start: Int64Array = np.empty(0, np.int64)
        self.first_ts: Int64Array = np.empty(0, np.int64)
        self._blocks: list[_Block] = []
        self._pending: list[tuple[Int64Array, Int64Array, Float64Array]] = []
        # False once a sample older than its series' newest arrived: the blocks' order no
        # longer implies time order, and the next read merges everything.
        self._ordered = True
        self._pending_samples = 0
        self.samples = 0
        # Set where a background thread merges (store.background): seals and merges that are
        # due are then asked of it instead of run inline, under the lock, in an append.
        self.offload: Callable[[], None] | None = None

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
        self.first_ts = np.concatenate([self.first_ts, np.full(grow, EMPTY, np.int64)])

    # -- writes ----------------------------------------------------------------------------
    def add(self, sid: Int64Array, ts: Int64Array, val: Float64Array) -> None:
        """Add validated samples sorted by (sid, ts); updates the newest sample per series."""
        if len(sid) == 0:
            return
        self.ensure_capacity(int(sid[-1]))
        if self._ordered and bool(np.any(ts < self.last_ts[sid])):
            # An out-of-order sample: block order no longer implies time order.
            self._ordered = False
        self._pending.append((sid, ts, val))
        self.samples += len(sid)
        self._pending_samples += len(sid)
        change = np.append(sid[1:] != sid[:-1], True)
        last = np.flatnonzero(change)
        first = np.append(0, last[:-1] + 1)
        self.first_ts[sid[first]] = np.minimum(self.first_ts[sid[first]], ts[first])
        newer = ts[last] > self.last_ts[sid[last]]
        last = last[newer]
        self.last_ts[sid[last]] = ts[last]
        self.last_bits[sid[last]] = val[last].view(np.uint64)
        if self._pending_samples >= _SEAL_PENDING:  # no read for a while: keep pending bounded
            if self.offload is not None and self._ordered and self._pending_samples < _OFFLOAD_PENDING:
                self.offload()
            else:
                self._seal()

    def _seal(self) -> None:
        """Pending batches become a block; blocks of one size class merge (see the module doc)."""
        if not self._ordered:
            self.compact()
            return
        if not self._pending:
            return
        self._blocks.append(_merge(self._pending_runs(), True))
        self._pending, self._pending_samples = [], 0
        blocks = self._blocks
        if self.offload is not None and len(blocks) <= _MAX_BLOCKS:
            if self._size_class_due():
                self.offload()
            return
        while self._size_class_due():
            merged = _merge([b.run() for b in blocks[-_FANIN:]], True)
            del blocks[-_FANIN:]
            blocks.append(merged)
        if len(blocks) > _MAX_BLOCKS:
            self.compact()

    def _size_class_due(self) -> bool:
        blocks = self._blocks
        return len(blocks) >= _FANIN and _level(len(blocks[-_FANIN])) <= _level(len(blocks[-1]))

    # -- merges off the store's lock (see SealWork) ----------------------------------------
    def seal_work(self, pending_from: int | None = None) -> SealWork | None:
        """The next merge that is due, to run off the lock; None when none is (call with the
        lock). ``pending_from``: the pending samples that make a seal due (default: as inline)."""
        if not self._ordered:  # the next read merges everything, in time order
            return None
        if self._pending and self._pending_samples >= (_SEAL_PENDING if pending_from is None else pending_from):
            return SealWork(pending=tuple(self._pending))
        if self._size_class_due():
            return SealWork(blocks=tuple(self._blocks[-_FANIN:]))
        return None

    def adopt(self, work: SealWork, block: _Block) -> bool:
        """Put ``block`` in place of what ``work`` merged, if the head still holds exactly that
        (a read may have sealed or compacted meanwhile: then nothing changes and False)."""
        if work.pending:
            k = len(work.pending)
            if not self._ordered or len(self._pending) < k or any(a is not b for a, b in zip(self._pending, work.pending)):
                return False
            self._blocks.append(block)  # pending batches are newer than every block
            self._pending = self._pending[k:]
            self._pending_samples -= len(block)
            return True
        first = next((i for i, b in enumerate(self._blocks) if b is work.blocks[0]), -1)
        end = first + len(work.blocks)
        if first < 0 or end > len(self._blocks) or any(a is not b for a, b in zip(self._blocks[first:end], work.blocks)):
            return False
        self._blocks[first:end] = [block]  # in place: block order is time order
        return True

    def compact(self) -> None:
        """Merge every block and pending batch into one block."""
        if not self._pending and len(self._blocks) <= 1 and self._ordered:
            return
        parts = [b.run() for b in self._blocks] + self._pending_runs()
        self._blocks = [_merge(parts, self._ordered)] if parts else []
        self._pending, self._pending_samples = [], 0
        self._ordered = True

    def frozen(self) -> Frozen:
        return Frozen(tuple(self._blocks), tuple(self._pending), self._ordered)

    def seal(self) -> None:
        """Pending batches into a block now (a checkpoint's plan freezes blocks only, so that
        seals while it is written only add blocks behind them)."""
        self._seal()

    def replace_frozen(self, frozen: Frozen, block: _Block, bound: Int64Array) -> bool:
        """Put ``block`` (what ``frozen`` held, trimmed below ``bound``) in its place, if the head
        still begins with exactly ``frozen`` (blocks sealed since stay behind ``block``; a full
        merge since -- a read that needed one block -- leaves nothing to replace). False, and
        nothing changed, otherwise."""
        k, n = len(frozen.blocks), len(frozen.pending)
        if len(self._blocks) < k or any(a is not b for a, b in zip(self._blocks, frozen.blocks)):
            return False
        if len(self._pending) < n or any(a is not b for a, b in zip(self._pending, frozen.pending)):
            return False
        later, newer = self._blocks[k:], self._pending[n:]
        self._blocks = ([block] if len(block) else []) + later
        self._pending = newer
        self._pending_samples = sum(len(p[0]) for p in newer)
        self.samples = sum(len(b) for b in self._blocks) + self._pending_samples
        # exact again, as after trim(): the oldest sample of each series still held
        self.first_ts[:] = EMPTY
        for b in self._blocks:
            np.minimum.at(self.first_ts, b.usid, b.ts[b.offs[:-1]])
        for sid, ts, _ in newer:
            np.minimum.at(self.first_ts, sid, ts)
        m = min(len(bound), self.capacity)
        touched = np.flatnonzero(bound[:m] > self.head_start[:m])
        self.head_start[touched] = bound[touched]
        return True

    def _pending_runs(self) -> list[Run]:
        return [(*_csr(sid), ts, val) for sid, ts, val in self._pending]

    # -- reads -----------------------------------------------------------------------------
    def bounds(self, sids: Int64Array) -> tuple[Int64Array, Int64Array]:
        """[lo, hi) positions of each series' samples in the compacted block (:meth:`columns`)."""
        self.compact()
        sids = np.asarray(sids, np.int64)
        if not self._blocks:
            zero = np.zeros(len(sids), np.int64)
            return zero, zero.copy()
        return self._blocks[0].segments(sids)

    def window(self, sids: Int64Array, start_ms: int, end_ms: int) -> tuple[Int64Array, Int64Array, Int64Array, Float64Array]:
        """Samples of ``sids`` with start <= ts <= end, without a per-series loop: (segment
        starts, segment counts, ts, values), segment i belonging to ``sids[i]``."""
        self._seal()
        sids = np.asarray(sids, np.int64)
        picked: list[tuple[_Block, Int64Array, Int64Array]] = []  # block, lo, counts
        for block in self._blocks:
            if block.max_ts < start_ms or block.min_ts > end_ms or not len(block):
                continue
            if block.min_ts >= start_ms and block.max_ts <= end_ms:  # whole block inside
                lo, hi = block.segments(sids)
            else:
                key, base = block.key(), sids << 42
                lo = np.searchsorted(key, base | max(start_ms, 0), side="left")
                hi = np.searchsorted(key, base | max(end_ms + 1, 0), side="left")
            picked.append((block, lo, hi - lo))
        n = len(sids)
        starts = np.zeros(n, np.int64)
        if not picked:
            counts = np.zeros(n, np.int64)
            return starts, counts, np.empty(0, np.int64), np.empty(0, np.float64)
        if len(picked) == 1:
            block, lo, counts = picked[0]
            if n > 1:
                np.cumsum(counts[:-1], out=starts[1:])
            total = int(counts.sum())
            # positions lo[i] .. lo[i]+counts[i]-1 for every i, as one index array
            index = np.arange(total, dtype=np.int64) - np.repeat(starts - lo, counts)
            return starts, counts, block.ts[index], block.val[index]
        counts = np.sum([c for _, _, c in picked], axis=0).astype(np.int64)
        if n > 1:
            np.cumsum(counts[:-1], out=starts[1:])
        total = int(counts.sum())
        out_ts = np.empty(total, np.int64)
        out_val = np.empty(total, np.float64)
        offset = starts.copy()  # where each series' next block segment goes
        for block, lo, c in picked:
            m = int(c.sum())
            if m:
                local = np.zeros(n, np.int64)
                if n > 1:
                    np.cumsum(c[:-1], out=local[1:])
                ramp = np.arange(m, dtype=np.int64)
                src = ramp - np.repeat(local - lo, c)
                dst = ramp - np.repeat(local - offset, c)
                out_ts[dst] = block.ts[src]
                out_val[dst] = block.val[src]
            offset += c
        return starts, counts, out_ts, out_val

    def columns(self) -> tuple[Int64Array, Int64Array, Float64Array]:
        """The whole head as one block: (sid, ts, value), sorted by (sid, ts)."""
        self.compact()
        if not self._blocks:
            empty = np.empty(0, np.int64)
            return empty, empty.copy(), np.empty(0, np.float64)
        block = self._blocks[0]
        return block.sid(), block.ts, block.val

    def series(self, sid: int, start_ms: int = NEVER, end_ms: int = 2**62) -> tuple[Int64Array, Float64Array]:
        _, _, ts, val = self.window(np.asarray([sid], np.int64), start_ms, end_ms)
        return ts, val

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

    def may_hold_unflushed_below(self, cutoff: Int64Array) -> bool:
        """False only when no series can have an unflushed sample below its cutoff (cheap:
        per-series arrays only, no pass over the samples)."""
        n = min(len(cutoff), self.capacity)
        lower = np.maximum(self.flushed_until[:n], self.first_ts[:n])
        return bool(np.any(cutoff[:n] > lower))

    def mark_flushed(self, sids: Int64Array, cutoff: Int64Array) -> None:
        self.flushed_until[sids] = np.maximum(self.flushed_until[sids], cutoff[sids])

    def trim(self, keep_from: Int64Array) -> int:
        """Drop flushed samples older than ``keep_from[sid]``; returns how many were dropped."""
        if self.samples == 0:
            return 0
        bound = np.minimum(keep_from, self.flushed_until)
        touched = bound > self.head_start
        if not bool(np.any(bound > self.first_ts)):  # nothing that old is held: no pass over the samples
            self.head_start[touched] = bound[touched]
            return 0
        sid, ts, val = self.columns()
        if len(sid) == 0:
            return 0
        keep = ts >= bound[sid]
        dropped = int(len(keep) - np.count_nonzero(keep))
        if dropped:
            sid, ts, val = sid[keep], ts[keep], val[keep]
            self._blocks = [_Block.of(sid, ts, val)] if len(sid) else []
            self.samples -= dropped
        # exact again: the oldest sample of each series still held (sorted by sid, ts)
        self.first_ts[:] = EMPTY
        if len(sid):
            firsts = np.flatnonzero(np.append(True, sid[1:] != sid[:-1]))
            self.first_ts[sid[firsts]] = ts[firsts]
        self.head_start[touched] = bound[touched]
        return dropped
