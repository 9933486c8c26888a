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

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from store.flat_runs import spread
from store.head_blocks import _FANIN, Run, _Block, _csr, _level, _merge
from store.head_frozen import Frozen, SealWork
from store.head_packed import Block, pack_if_large, packable
from store.types import Float64Array, Int64Array

NEVER = np.iinfo(np.int64).min
EMPTY = np.iinfo(np.int64).max  # first_ts of a series without samples in the head

_SEAL_PENDING = 2_000_000  # samples waiting for a read before they are sealed all the same
_MAX_BLOCKS = 48  # past this, merge everything (only odd size sequences get here)
_OFFLOAD_PENDING = 3 * _SEAL_PENDING  # pending past this is sealed inline: the merging thread lags


class Head:
    def __init__(self) -> None:
        self.last_ts: Int64Array = np.empty(0, np.int64)
        self.last_bits: npt.NDArray[np.uint64] = np.empty(0, np.uint64)
        self.flushed_until: Int64Array = np.empty(0, np.int64)
        self.head_start: Int64Array = np.empty(0, np.int64)
        self.first_ts: Int64Array = np.empty(0, np.int64)
        self._blocks: list[Block] = []
        self._pending: list[tuple[Int64Array, Int64Array, Float64Array]] = []
        # False once a sample older than its series' newest arrived: the blocks' order no
        # longer implies time order, and the next read merges everything.
        self._ordered = True
        self._pending_samples = 0
        self.samples = 0
        # Set where a background thread merges (store.background): seals and merges that are
        # due are then asked of it instead of run inline, under the lock, in an append.
        self.offload: Callable[[], None] | None = None
        self._pinned: Frozen | None = None  # see pin()

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
            if self._due_merge()[0]:
                self.offload()
            return
        while (due := self._due_merge())[0]:
            count, pack = due
            blocks[-count:] = [SealWork(blocks=tuple(blocks[-count:]), pack=pack).merge()]
        if len(blocks) > _MAX_BLOCKS:
            self.compact()

    def _due_merge(self) -> tuple[int, bool]:
        """How many of the newest blocks to merge now (0: none), and whether to pack the result.

        Only plain blocks merge: the newest ``_FANIN`` of one size class (size-tiered), or all
        of them, packed, once together they hold enough samples a series to be worth packing
        (:func:`store.head_packed.packable`). Packed blocks are left as they are: re-packing
        them would cost more than the longer list of blocks a read goes through."""
        blocks = self._blocks
        plain = 0
        pinned = self._pinned.blocks if self._pinned is not None else ()
        while plain < len(blocks) and isinstance(blocks[-1 - plain], _Block) and \
                not any(blocks[-1 - plain] is b for b in pinned):
            plain += 1
        if plain >= 2:
            tail = blocks[-plain:]
            if packable(sum(map(len, tail)), self._series_in(tail)):
                return plain, True
        if plain >= _FANIN and _level(len(blocks[-_FANIN])) <= _level(len(blocks[-1])):
            return _FANIN, False
        return 0, False

    @staticmethod
    def _series_in(blocks: list[Block]) -> int:
        """A lower bound on the series the blocks hold together (the most any one holds)."""
        return max(len(b.usid) for b in blocks)

    # -- merges off the store's lock (see SealWork) ----------------------------------------
    def seal_work(self, pending_from: int | None = None) -> SealWork | None:
        """The next merge that is due, to run off the lock; None when none is (call with the
        lock). ``pending_from``: the pending samples that make a seal due (default: as inline)."""
        if not self._ordered:  # the next read merges everything, in time order
            return None
        if self._pending and self._pending_samples >= (_SEAL_PENDING if pending_from is None else pending_from):
            return SealWork(pending=tuple(self._pending))
        due, pack = self._due_merge()
        return SealWork(blocks=tuple(self._blocks[-due:]), pack=pack) if due else None

    def adopt(self, work: SealWork, block: Block) -> bool:
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

    def compact(self) -> _Block | None:
        """Merge every block and pending batch into one block (kept packed where that pays);
        returns it unpacked, None when the head is empty."""
        if not self._pending and len(self._blocks) <= 1 and self._ordered:
            if not self._blocks:
                return None
            only = self._blocks[0]
            return only if isinstance(only, _Block) else _Block(*only.run())
        parts = [b.run() for b in self._blocks] + self._pending_runs()
        merged = _merge(parts, self._ordered) if parts else None
        self._blocks = [pack_if_large(merged)] if merged is not None else []
        self._pending, self._pending_samples = [], 0
        self._ordered = True
        return merged

    def frozen(self) -> Frozen:
        return Frozen(tuple(self._blocks), tuple(self._pending), self._ordered)

    def pin(self, frozen: Frozen) -> None:
        """A checkpoint works on ``frozen``: its blocks are not packed together with newer ones
        until :meth:`release` (else the checkpoint could not put its trimmed blocks back in
        their place and would trim the whole head, under the lock, instead)."""
        self._pinned = frozen

    def release(self) -> None:
        """A checkpoint is done with its frozen head (committed or not): its blocks may merge."""
        self._pinned = None

    def seal(self) -> None:
        """Pending batches into a block now (a checkpoint's plan freezes blocks only, so that
        seals while it is written only add blocks behind them)."""
        self._seal()

    def replace_frozen(self, frozen: Frozen, blocks: Sequence[Block], bound: Int64Array) -> bool:
        """Put ``blocks`` (what ``frozen`` held, trimmed below ``bound``) in its place, if the head
        still begins with exactly ``frozen`` (blocks sealed since stay behind ``block``; a full
        merge since -- a read that needed one block -- leaves nothing to replace). False, and
        nothing changed, otherwise."""
        k, n = len(frozen.blocks), len(frozen.pending)
        if len(self._blocks) < k or any(a is not b for a, b in zip(self._blocks, frozen.blocks)):
            return False
        if len(self._pending) < n or any(a is not b for a, b in zip(self._pending, frozen.pending)):
            return False
        later, newer = self._blocks[k:], self._pending[n:]
        self._blocks = [b for b in blocks if len(b)] + later
        self._pending = newer
        self._pending_samples = sum(len(p[0]) for p in newer)
        self.samples = sum(len(b) for b in self._blocks) + self._pending_samples
        # exact again, as after trim(): the oldest sample of each series still held
        self.first_ts[:] = EMPTY
        for b in self._blocks:
            np.minimum.at(self.first_ts, b.usid, b.firsts())
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
        block = self.compact()
        sids = np.asarray(sids, np.int64)
        if block is None:
            zero = np.zeros(len(sids), np.int64)
            return zero, zero.copy()
        return block.segments(sids)

    def window(self, sids: Int64Array, start_ms: int, end_ms: int) -> tuple[Int64Array, Int64Array, Int64Array, Float64Array]:
        """Samples of ``sids`` with start <= ts <= end, without a per-series loop: (segment
        starts, segment counts, ts, values), segment i belonging to ``sids[i]``."""
        self._seal()
        sids = np.asarray(sids, np.int64)
        picked = [block.slices(sids, start_ms, end_ms) for block in self._blocks
                  if len(block) and block.max_ts >= start_ms and block.min_ts <= end_ms]
        n = len(sids)
        starts = np.zeros(n, np.int64)
        if not picked:
            return starts, np.zeros(n, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
        if len(picked) == 1:
            counts, ts, val = picked[0]
            if n > 1:
                np.cumsum(counts[:-1], out=starts[1:])
            return starts, counts, ts, val
        # Each block gave its samples id after id; interleave them: a series' samples from an
        # earlier block come first (blocks are in time order).
        counts = np.sum([c for c, _, _ in picked], axis=0).astype(np.int64)
        if n > 1:
            np.cumsum(counts[:-1], out=starts[1:])
        total = int(counts.sum())
        out_ts = np.empty(total, np.int64)
        out_val = np.empty(total, np.float64)
        offset = starts.copy()  # where each series' next block segment goes
        for c, ts, val in picked:
            if len(ts):
                dst = spread(offset, c)
                out_ts[dst] = ts
                out_val[dst] = val
            offset += c
        return starts, counts, out_ts, out_val

    def columns(self) -> tuple[Int64Array, Int64Array, Float64Array]:
        """The whole head as one block: (sid, ts, value), sorted by (sid, ts)."""
        block = self.compact()
        if block is None:
            empty = np.empty(0, np.int64)
            return empty, empty.copy(), np.empty(0, np.float64)
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
            self._blocks = [pack_if_large(_Block.of(sid, ts, val))] if len(sid) else []
            self.samples -= dropped
        # exact again: the oldest sample of each series still held (sorted by sid, ts)
        self.first_ts[:] = EMPTY
        if len(sid):
            firsts = np.flatnonzero(np.append(True, sid[1:] != sid[:-1]))
            self.first_ts[sid[firsts]] = ts[firsts]
        self.head_start[touched] = bound[touched]
        return dropped
