"""Checkpoint: head samples below each series' cutoff become chunks and rollups, atomically.

One transaction writes the chunks, folds the rollups into spans (:mod:`store.rollup_spans`;
merging the rare bucket that an earlier, unaligned flush already started) and deletes the
write-ahead rows whose samples are all flushed by then (:mod:`store.wal_ledger`; a row with
any sample left stays whole). Either all of it commits or none of it does, so after a crash
at any point the write-ahead table plus the chunks hold every sample, and replay takes from
the write-ahead rows only what is past the chunks: every sample is read exactly once. (A
background checkpoint on SQLite commits each slice of whole series on its own instead, see
:mod:`store.background`; the same replay rule keeps that exact.)

Three steps, so that the slow middle one can run off the store's lock (see
:mod:`store.background`): :func:`plan_checkpoint` takes what to write from the head,
:func:`write_checkpoint` writes it in the caller's transaction, :func:`apply_checkpoint`
moves the head's marks once that transaction committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from store.backend import CHUNK_COLUMNS
from store.codec import ENCODING, encode_segments
from store.flat_runs import range_breaks
from store.head import NEVER
from store.head_blocks import _Block, slice_end
from store.head_frozen import Frozen
from store.head_packed import Block, joined, pack_dense
from store.rollup import Frame, merge_rows, regroup
from store.rollup_spans import SPAN_COLUMNS, span_rows, split_last
from store.slice_sizes import FixedSlices, SliceSizes
from store.types import Float64Array, Int64Array

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore

log = logging.getLogger(__name__)


# Samples encoded and folded per slice: the transaction stays one, but the temporaries
# (codec columns, rollup frames, rows for the driver) are bounded by a slice, not a checkpoint.
SLICE_SAMPLES = 250_000
# Samples a checkpoint merges and splits at once (see write_checkpoint): its temporaries (~50
# bytes a sample) are bounded by this, not by the head; and, as in store.head_packed, no numpy
# call holds the interpreter for long.
MERGE_SAMPLES = 1 << 18
_RANGES_PER_DELETE = 200  # id runs per DELETE statement (SQLite allows 32,766 parameters)


class SliceHooks(Protocol):
    """What :func:`write_checkpoint` tells a caller around each slice (series of the slice)."""

    def before(self, sids: Int64Array) -> None: ...

    def after(self, sids: Int64Array) -> None: ...


@dataclass
class Plan:
    """What one checkpoint writes: the cutoffs and marks taken under the store's lock with the
    head as it was then (``frozen``); from :func:`prepare`, which needs no lock, the bound the
    head is trimmed to and which of its blocks hold samples to flush; and, as
    :func:`write_checkpoint` goes, what it wrote and the head trimmed once that commits.

    ``wal_ranges``: the write-ahead rows, written before the plan, that hold only samples
    flushed once it commits (inclusive id runs); the checkpoint deletes them. Rows appended
    while the plan is written come after them and stay."""

    cutoff: Int64Array
    keep_from: Int64Array
    marked: Int64Array
    flushed_until: Int64Array
    frozen: Frozen
    wal_ranges: list[tuple[int, int]]
    sources: int = 0  # the frozen head's oldest blocks that are merged (the rest stay as they are)
    untouched: tuple[Block, ...] = ()
    trimmed: list[Block] | None = None
    bound: Int64Array = field(default_factory=lambda: np.empty(0, np.int64))
    written: list[tuple[int, Frame, Frame]] = field(default_factory=list)
    samples: int = 0  # flushed so far
    slices: int = 0  # written so far
    series: list[Int64Array] = field(default_factory=list)  # the ids flushed, slice by slice (ascending)

    def series_flushed(self) -> Int64Array:
        """The ids of every series the plan flushed samples of so far, ascending."""
        return np.concatenate(self.series) if self.series else np.empty(0, np.int64)


def plan_checkpoint(store: TimeSeriesStore, cutoff: Int64Array, retain_ms: int,
                    drop: npt.NDArray[np.bool_] | None = None) -> Plan | None:
    """The checkpoint's plan (call with the store's lock held: per-series arrays only, no pass
    over the samples), or None when nothing is due. Call :func:`prepare` next.

    ``drop``: series that keep no flushed samples in memory (stopped, under pressure)."""
    head = store.head
    keep = np.where(head.last_ts == NEVER, head.last_ts, head.last_ts - retain_ms)
    if drop is not None:
        keep[drop] = head.last_ts[drop] + 1
    live = head.last_ts != NEVER
    marked = np.flatnonzero(live & (cutoff > head.flushed_until) & (head.last_ts >= head.flushed_until))
    if not head.may_hold_unflushed_below(cutoff):
        # Nothing to write (e.g. under memory pressure, every sample is still inside the
        # out-of-order window): advancing the marks needs no transaction -- the write-ahead
        # rows stay valid as they are -- and no pass over the head's samples.
        if len(marked):
            head.mark_flushed(marked, cutoff)
            store.flush_epoch += 1
            head.trim(keep)
        return None
    head.seal()
    wal_ranges = store.wal_ledger.flushed(store.last_wal_id, _oldest_unflushed(store, cutoff, marked))
    frozen = head.frozen()
    head.pin(frozen)
    return Plan(cutoff.copy(), keep, marked, head.flushed_until.copy(), frozen, wal_ranges)


def _marks_after(flushed_until: Int64Array, cutoff: Int64Array, marked: Int64Array) -> Int64Array:
    """Each series' flushed mark once a plan with these cutoffs and marked series commits."""
    after = flushed_until.copy()
    after[marked] = np.maximum(after[marked], cutoff[marked])
    return after


def _oldest_unflushed(store: TimeSeriesStore, cutoff: Int64Array, marked: Int64Array) -> int:
    """A lower bound on every sample still unflushed once the plan commits (per series the
    larger of its flushed mark then and its oldest sample in the head); every sample of the
    head older than this is in a chunk by then."""
    head = store.head
    n = head.capacity
    after = _marks_after(head.flushed_until[:n], cutoff, marked)
    pending = (head.last_ts[:n] != NEVER) & (head.last_ts[:n] >= after)
    if not pending.any():
        return int(np.iinfo(np.int64).max)
    return int(np.maximum(after[pending], head.first_ts[:n][pending]).min())


def prepare(plan: Plan) -> Plan:
    """What the plan merges (no lock needed): the head's bound once it is written (samples
    below it go), and its oldest blocks that hold samples to flush or drop; the newer ones stay
    as they are (packed ones stay packed)."""
    n = len(plan.cutoff)
    after = _marks_after(plan.flushed_until, plan.cutoff, plan.marked)
    plan.bound = np.minimum(plan.keep_from[:n], after)
    due_from = np.where(plan.cutoff > plan.flushed_until, plan.cutoff, NEVER)
    plan.untouched = plan.frozen.untouched_tail(np.maximum(plan.bound, due_from))
    plan.sources = len(plan.frozen.blocks) - len(plan.untouched)
    return plan


def write_checkpoint(store: TimeSeriesStore, cur: Any, plan: Plan, pause: Callable[[], None] | None = None,
                     sizes: SliceSizes | None = None, hooks: SliceHooks | None = None) -> None:
    """Chunks and rollups of the plan and the write-ahead rows it empties deleted, on ``cur``
    inside one transaction the caller commits; and ``plan.trimmed``, the head once it commits.
    Needs no store lock: it reads the head only for ``flushed_until``, which only the
    checkpoint itself moves.

    The plan's blocks are merged a range of series at a time (:data:`MERGE_SAMPLES`): each
    range's samples due are written, in slices (``sizes``; by default :data:`SLICE_SAMPLES`
    each), and those it keeps are packed, before the next range is merged. Merging the whole
    head first held every sample unpacked at once with its masks and copies (~50 bytes a
    sample: the service's RSS jumped by ~1.6 GiB at 30 M), and the samples due then had to be
    packed and unpacked again.
    ``pause``: called between slices (a background checkpoint gives way to appends there).
    ``hooks``: told each slice's series before and after it is written; a caller that commits
    after each makes every slice a transaction of its own (see :mod:`store.background`)."""
    sizes = FixedSlices(SLICE_SAMPLES) if sizes is None else sizes
    kept: list[Block] = []
    merges = plan.frozen.merged_slices(plan.sources, MERGE_SAMPLES)
    while True:
        if pause is not None:
            pause()
        block = next(merges, None)
        if block is None:
            break
        sid, ts, val = block.sid(), block.ts, block.val
        due = (ts >= plan.flushed_until[sid]) & (ts < plan.cutoff[sid])
        flush = _Block.of(sid[due], ts[due], val[due])
        keep = ts >= plan.bound[sid]
        kept.append(pack_dense(_Block.of(sid[keep], ts[keep], val[keep])))
        del block, sid, ts, val, due, keep
        lo = 0
        while lo < len(flush.usid):
            if pause is not None:
                pause()
            hi = slice_end(flush.offs, lo, sizes.begin())
            ids, ts, val = flush.series(lo, hi)
            if hooks is not None:
                hooks.before(ids)
            plan.written.extend(_flush_slice(store, cur, ids, ts, val))
            if hooks is not None:
                hooks.after(ids)
            sizes.end(len(ts))
            plan.samples += len(ts)
            plan.slices += 1
            plan.series.append(flush.usid[lo:hi])
            lo = hi
    plan.trimmed = [joined(kept), *plan.untouched]
    p = store.backend.param
    for at in range(0, len(plan.wal_ranges), _RANGES_PER_DELETE):
        ranges = plan.wal_ranges[at : at + _RANGES_PER_DELETE]
        where = " OR ".join([f"id BETWEEN {p} AND {p}"] * len(ranges))
        cur.execute(f"DELETE FROM wal WHERE {where}", [bound for pair in ranges for bound in pair])


def apply_checkpoint(store: TimeSeriesStore, plan: Plan) -> None:
    """The head and caches after the plan's transaction committed (store lock held)."""
    head = store.head
    head.mark_flushed(plan.marked, plan.cutoff)
    cache_written(store, plan)
    store.flush_epoch += 1
    store.wal_ledger.forget(plan.wal_ranges)
    if plan.trimmed is None or not head.replace_frozen(plan.frozen, plan.trimmed, plan.bound):
        head.trim(plan.keep_from)  # the head was merged meanwhile (a read): trim it here
    head.release()
    log.debug("checkpoint: %d samples flushed, %d write-ahead id ranges deleted", plan.samples, len(plan.wal_ranges))


def cache_written(store: TimeSeriesStore, plan: Plan) -> None:
    """The rollup rows the plan wrote so far into the rollup cache, once committed (store lock
    held); they are taken out of ``plan.written`` (a checkpoint that commits slice by slice
    calls this after each)."""
    for resolution, frame, overlap in plan.written:
        # A merged bucket replaced a row a cached series already holds: refetch that series.
        store.rollup_cache.invalidate(resolution, overlap.sid.tolist())
        store.rollup_cache.extend(resolution, frame)
    plan.written.clear()


def run_checkpoint(store: TimeSeriesStore, cutoff: Int64Array, retain_ms: int,
                   drop: npt.NDArray[np.bool_] | None = None) -> tuple[int, int]:
    """A whole checkpoint on the store's own connection (store lock held); returns the samples
    flushed and the slices they were written in."""
    plan = plan_checkpoint(store, cutoff, retain_ms, drop)
    if plan is None:
        return 0, 0
    try:
        prepare(plan)
        with store.transaction() as cur:
            write_checkpoint(store, cur, plan)
        apply_checkpoint(store, plan)
    finally:
        store.head.release()
    return plan.samples, plan.slices


def _flush_slice(
    store: TimeSeriesStore, cur: Any, sid: Int64Array, ts: Int64Array, val: Float64Array
) -> list[tuple[int, Frame, Frame]]:
    """Chunks and rollups of whole series; returns (resolution, rows written, merged rows)."""
    head = store.head
    # A chunk per series and chunk range: a checkpoint that ran late (a background one behind
    # a backfill, a restart) writes the same chunks as one at every boundary would have.
    rng = store.options.chunk_range_ms
    starts = np.flatnonzero(range_breaks(sid, ts, rng))
    ends = np.append(starts[1:], len(sid))
    blobs = encode_segments(ts, val, starts)
    chunk_rows = zip(
        sid[starts].tolist(),
        ts[starts].tolist(),
        ts[ends - 1].tolist(),
        (ends - starts).tolist(),
        [ENCODING] * len(starts),
        blobs,
    )
    store.backend.bulk_insert(cur, "chunks", CHUNK_COLUMNS, chunk_rows)
    samples = Frame.from_samples(sid, ts, val)
    written = []
    for resolution in store.options.rollup_resolutions_ms:
        frame = regroup(samples, resolution)
        # A bucket that starts before what was flushed earlier may already have a row.
        overlap = frame.take(np.flatnonzero(frame.bucket < head.flushed_until[frame.sid]))
        if len(overlap):
            frame = _merge_existing(store, cur, resolution, frame, overlap)
        store.backend.bulk_insert(cur, "rollup_spans", SPAN_COLUMNS, span_rows(resolution, frame, rng))
        written.append((resolution, frame, overlap))
    return written


def _merge_existing(store: TimeSeriesStore, cur: Any, resolution: int, frame: Frame, overlap: Frame) -> Frame:
    """Fold the stored overlapping buckets into ``frame``: each is the last bucket of its
    series' latest span, which is written again without it (or deleted, if that was all)."""
    p = store.backend.param
    found: list[tuple[Any, ...]] = []
    # Buckets split by a flush are the same bucket for many series at once: one statement per
    # bucket and batch of series, not one per series.
    by_bucket: dict[int, list[int]] = {}
    for s, bucket in zip(overlap.sid.tolist(), overlap.bucket.tolist()):
        by_bucket.setdefault(bucket, []).append(s)
    for bucket, sids in by_bucket.items():
        for start in range(0, len(sids), 500):
            group = sids[start : start + 500]
            marks = ", ".join([p] * len(group))
            where = f"resolution_ms = {p} AND last_ms = {p} AND series_id IN ({marks})"
            cur.execute(f"SELECT series_id, first_ms, n, payload FROM rollup_spans WHERE {where}",
                        (resolution, bucket, *group))
            rows = [tuple(r) for r in cur.fetchall()]
            if rows:
                found.extend(rows)
                cur.execute(f"DELETE FROM rollup_spans WHERE {where}", (resolution, bucket, *group))
    if not found:
        return frame
    old, kept = split_last(found, resolution)
    store.backend.bulk_insert(cur, "rollup_spans", SPAN_COLUMNS, kept)
    return merge_rows(old, frame, resolution)
