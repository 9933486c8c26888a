"""The time-series store: head in memory, write-ahead table, chunks and rollups in SQL.

Write path (:meth:`TimeSeriesStore.append`), under one lock:

1. resolve series ids (new series inserted in the same transaction);
2. validate against the head, vectorised: exact duplicates are dropped, samples older than
   the out-of-order window (or below what is already in chunks) and conflicting duplicates
   are rejected with a typed reason;
3. write the accepted samples as one write-ahead row and commit -- only then is the batch
   acknowledged, so a killed process loses nothing it acknowledged;
4. add them to the head, and checkpoint when series are due.

A checkpoint (:mod:`store.checkpoint`) turns head samples below each series' cutoff into
chunks and rollups, deletes every write-ahead row and writes one row with the unflushed tail,
all in one transaction. At open the head is rebuilt from that tail plus newer rows.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, func, select

from store import schema
from store.active_series import ActiveSeries, stopped
from store.append_result import AppendResult as AppendResult
from store.append_result import RejectReason as RejectReason
from store.backend import Backend, backend_for
from store.chunk_cache import ChunkCache
from store.clock import Clock
from store.head import EMPTY, NEVER, Head
from store.options import MINUTE_MS, StoreOptions
from store.rollup_cache import RollupCache
from store.series_index import REFUSED, SeriesIndex
from store.types import Float64Array, Int64Array, SampleBatch, SeriesKey
from store.wal import decode_wal, encode_wal

log = logging.getLogger(__name__)


_ACCEPT, _DUPLICATE, _TOO_OLD, _CONFLICT, _TOO_NEW, _SERIES_LIMIT = 0, 1, 2, 3, 4, 5
_REASONS = {_TOO_OLD: RejectReason.TOO_OLD, _CONFLICT: RejectReason.CONFLICT, _TOO_NEW: RejectReason.TOO_NEW,
            _SERIES_LIMIT: RejectReason.SERIES_LIMIT}


class TimeSeriesStore:
    """Owns the head, the series index and the write connection of one database.

    One writer process per database: the head and the write-ahead tail belong to it.
    ``read_only`` opens rebuild the head from the write-ahead table but never write, which
    is how a second process (the CLI's ``query``) sees data the writer has not flushed yet.
    """

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        options: StoreOptions | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.options = options or StoreOptions()
        self.read_only = read_only
        self.backend: Backend = backend_for(engine.dialect.name)
        self.head = Head()
        self.rollup_cache = RollupCache(self.options.rollup_cache_rows)
        self.chunk_cache = ChunkCache(self.options.chunk_cache_bytes)
        # Counts checkpoints and retention passes: a rollup cache fill that started under an
        # older epoch may have missed rows and is not kept.
        self.flush_epoch = 0
        self.index = SeriesIndex()
        self.lock = threading.RLock()
        self._conn: Any = None
        self._due_since: float | None = None
        self._pressure_at = self.options.max_head_samples
        self._stopped_check_at = float("-inf")
        self._last_retention_ms = NEVER
        self.stats = {"appended": 0, "duplicates": 0, "rejected": 0, "checkpoints": 0}
        self._rejected: dict[RejectReason, int] = {reason: 0 for reason in RejectReason}
        self.active = ActiveSeries(self.head, self.options.max_series, self.options.idle_flush_ms)

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        with self.lock:
            with self.engine.connect() as conn:
                rows = conn.execute(select(schema.series.c.id, schema.series.c.metric, schema.series.c.labels))
                self.index.load((int(r[0]), str(r[1]), str(r[2])) for r in rows)
                self.head.ensure_capacity(self.index.max_id())
                flushed = conn.execute(
                    select(schema.chunks.c.series_id, func.max(schema.chunks.c.end_ms)).group_by(
                        schema.chunks.c.series_id
                    )
                ).all()
                for sid, end_ms in flushed:
                    self.head.ensure_capacity(int(sid))
                    self.head.flushed_until[int(sid)] = int(end_ms) + 1
                    self.head.head_start[int(sid)] = int(end_ms) + 1
                replayed = 0
                for (payload,) in conn.execute(select(schema.wal.c.payload).order_by(schema.wal.c.id)):
                    sid, ts, val = decode_wal(payload)
                    replayed += self._replay(sid, ts, val)
            if not self.read_only:
                self._conn = self.engine.raw_connection()
            log.info("store opened: %d series, %d samples replayed into the head", len(self.index), replayed)

    def _replay(self, sid: Int64Array, ts: Int64Array, val: Float64Array) -> int:
        if len(sid) == 0:
            return 0
        self.head.ensure_capacity(int(sid.max()))
        keep = ts >= self.head.flushed_until[sid]
        sid, ts, val = sid[keep], ts[keep], val[keep]
        order = np.lexsort((ts, sid))
        self.head.add(sid[order], ts[order], val[order])
        return int(len(sid))

    def close(self, flush: bool = True) -> None:
        with self.lock:
            if self._conn is not None:
                if flush:
                    self.checkpoint(force=True)
                self._conn.close()
                self._conn = None

    # -- write path --------------------------------------------------------------------------
    def append(self, batch: SampleBatch) -> AppendResult:
        """Store a batch; returns only once the accepted samples are committed."""
        if self._conn is None:
            raise RuntimeError("the store is not open for writing")
        result = AppendResult()
        if len(batch) == 0:
            return result
        with self.lock:
            now = self.clock.now_ms()
            with self.transaction() as cur:
                if batch.key_ids is not None:
                    key_ids = self._checked_ids(batch)
                else:
                    key_ids = self.index.resolve(batch.keys, self.backend, cur, now, self.active.room(now))
                sid = key_ids[batch.key_index]
                self.head.ensure_capacity(int(sid.max()))
                sid, ts, val = _sorted(sid, np.asarray(batch.ts_ms, np.int64), np.asarray(batch.values, np.float64))
                status = self._validate(sid, ts, val, now)
                accepted = status == _ACCEPT
                if not accepted.all():
                    sid, ts, val = sid[accepted], ts[accepted], val[accepted]
                if len(sid):
                    self.backend.insert_wal(cur, now, len(sid), encode_wal(sid, ts, val))
            self.active.born(self.index.commit_new(), now)
            self.head.add(sid, ts, val)
            counts = np.bincount(status, minlength=len(_REASONS) + 2)
            result.accepted = int(counts[_ACCEPT])
            result.duplicates = int(counts[_DUPLICATE])
            for code, reason in _REASONS.items():
                if counts[code]:
                    result.rejected[reason] = int(counts[code])
            self.stats["appended"] += result.accepted
            self.stats["duplicates"] += result.duplicates
            self.stats["rejected"] += result.rejected_total
            for reason, count in result.rejected.items():
                self._rejected[reason] += count
            self._maybe_checkpoint()
        return result

    def resolve(self, keys: Sequence[SeriesKey]) -> Int64Array:
        """Store ids for ``keys``, creating (and committing) series that are new."""
        if self._conn is None:
            raise RuntimeError("the store is not open for writing")
        with self.lock:
            now = self.clock.now_ms()
            with self.transaction() as cur:
                ids = self.index.resolve(keys, self.backend, cur, now, self.active.room(now))
            self.active.born(self.index.commit_new(), now)
            self.head.ensure_capacity(int(ids.max()) if len(ids) else 0)
            return ids

    def active_series(self, now_ms: int) -> int:
        """Series written, or created, within ``idle_flush_ms``: what ``max_series`` counts."""
        return self.active.count(now_ms)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor on the write connection; commits on success, rolls back on any error
        (forgetting series ids handed out inside it). Call with the lock held."""
        if self._conn is None:
            raise RuntimeError("the store is not open for writing")
        cur = self._conn.cursor()
        try:
            yield cur
            self._conn.commit()
        except BaseException:
            self._conn.rollback()
            self.index.forget_new()
            raise
        finally:
            cur.close()

    def _checked_ids(self, batch: SampleBatch) -> Int64Array:
        ids = np.asarray(batch.key_ids, dtype=np.int64)
        if len(ids) != len(batch.keys):
            raise ValueError("key_ids must give one id per key")
        if len(ids) and (ids.min() < 0 or ids.max() > self.index.max_id()):  # 0: refused by the series limit
            raise ValueError("key_ids holds ids this store did not hand out")
        return ids

    def _validate(self, sid: Int64Array, ts: Int64Array, val: Float64Array, now_ms: int) -> npt.NDArray[np.int8]:
        head = self.head
        bits = val.view(np.uint64)
        status = np.zeros(len(sid), dtype=np.int8)
        # Repeats inside the batch (sorted, so they are neighbours).
        same = np.flatnonzero((sid[1:] == sid[:-1]) & (ts[1:] == ts[:-1])) + 1
        if len(same):
            status[same] = np.where(bits[same] == bits[same - 1], _DUPLICATE, _CONFLICT)
        status[ts > now_ms + self.options.max_future_ms] = _TOO_NEW
        status[sid == REFUSED] = _SERIES_LIMIT
        last = head.last_ts[sid]
        window = self.options.out_of_order_window_ms
        floor = np.where(last == NEVER, NEVER, last - window)
        floor = np.maximum(floor, head.flushed_until[sid])
        open_ = status == _ACCEPT
        status[open_ & (ts < floor)] = _TOO_OLD
        at_last = (status == _ACCEPT) & (ts == last)
        if at_last.any():
            status[at_last] = np.where(bits[at_last] == head.last_bits[sid[at_last]], _DUPLICATE, _CONFLICT)
        # Out of order but inside the window: rare, so checked one at a time against the head.
        late = np.flatnonzero((status == _ACCEPT) & (ts < last))
        for i in late.tolist():
            existing = head.bits_at(int(sid[i]), int(ts[i]))
            if existing is not None:
                status[i] = _DUPLICATE if existing == int(bits[i]) else _CONFLICT
        return status

    def rejected_by_reason(self) -> dict[str, int]:
        return {reason.value: count for reason, count in self._rejected.items()}

    # -- checkpoints and retention -----------------------------------------------------------
    def cutoffs(self, force: bool = False, pressure: bool = False) -> Int64Array:
        """Per series, the timestamp below which head samples should be in chunks.

        Normally a multiple of the chunk range (so rollup buckets are never split); under
        memory ``pressure`` a minute boundary (the hour bucket then splits and is merged)."""
        head, opts = self.head, self.options
        last = head.last_ts
        has = last != NEVER
        cutoff = np.full(head.capacity, NEVER, np.int64)
        if force:
            cutoff[has] = last[has] + 1
            return cutoff
        rng = MINUTE_MS if pressure else opts.chunk_range_ms
        cutoff[has] = (last[has] - opts.out_of_order_window_ms) // rng * rng
        idle = has & (last < self.clock.now_ms() - opts.idle_flush_ms)
        if pressure:  # over the memory bound, series that stopped go whole, not after an hour
            idle |= self.stopped()
        cutoff[idle] = last[idle] + 1
        return cutoff

    def _stopped_series_hold_samples(self) -> bool:
        """Over the bound, whether series that stopped still hold samples in memory (looked at
        every few seconds at most: the pressure threshold itself moves up when nothing frees)."""
        now = self.clock.monotonic()
        if now < self._stopped_check_at:
            return False
        self._stopped_check_at = now + 5.0
        return bool((self.stopped() & (self.head.first_ts != EMPTY)).any())

    def stopped(self) -> npt.NDArray[np.bool_]:
        """Series quiet for the out-of-order window (:func:`store.active_series.stopped`)."""
        return stopped(self.head, self.clock.now_ms(), max(self.options.out_of_order_window_ms, MINUTE_MS))

    def _maybe_checkpoint(self) -> None:
        if self.head.samples > self.options.max_head_samples and self._stopped_series_hold_samples():
            self.checkpoint(pressure=True)
            return
        if self.head.samples > self._pressure_at:
            self.checkpoint(pressure=True)
            # If little could be flushed (everything is recent), wait for real growth before
            # trying again rather than re-running a useless checkpoint on every append.
            self._pressure_at = max(self.options.max_head_samples, int(self.head.samples * 1.25))
            return
        cutoff = self.cutoffs()
        # Unused id slots hold NEVER in both arrays: they are not pending.
        pending = (self.head.last_ts != NEVER) & (self.head.last_ts >= self.head.flushed_until)
        due = pending & (cutoff > self.head.flushed_until)
        n_due = int(np.count_nonzero(due))
        if n_due == 0:
            self._due_since = None
            return
        now = self.clock.monotonic()
        if self._due_since is None:
            self._due_since = now
        waited_ms = (now - self._due_since) * 1000
        if n_due == int(np.count_nonzero(pending)) or waited_ms >= self.options.checkpoint_grace_ms:
            self.checkpoint()

    def checkpoint(self, force: bool = False, pressure: bool = False) -> int:
        """Flush due head samples to chunks and rollups; returns the samples flushed."""
        from store.checkpoint import run_checkpoint

        with self.lock:
            if self._conn is None:
                return 0
            retain = self.options.out_of_order_window_ms if pressure else self.options.head_retain_ms
            flushed = run_checkpoint(self, self.cutoffs(force=force, pressure=pressure), retain,
                                     self.stopped() if pressure else None)
            if not pressure:
                self._pressure_at = self.options.max_head_samples
            self._due_since = None
            if flushed:
                self.stats["checkpoints"] += 1
            return flushed

    def maintain(self) -> None:
        """Periodic work for a background loop: idle flushes and retention."""
        with self.lock:
            if self._conn is None:
                return
            self._maybe_checkpoint()
            now = self.clock.now_ms()
            if now - self._last_retention_ms >= self.options.retention_interval_ms:
                from store.retention import apply_retention

                apply_retention(self, now)
                self._last_retention_ms = now

    # -- helpers for readers -----------------------------------------------------------------
    def head_window(self, sids: Int64Array, start_ms: int, end_ms: int) -> HeadWindow:
        """Like :meth:`head_snapshot`, flat and vectorised (no per-series Python loop)."""
        with self.lock:
            self.head.ensure_capacity(int(sids.max()) if len(sids) else 0)
            starts, counts, ts, val = self.head.window(sids, start_ms, end_ms)
            return HeadWindow(starts, counts, ts, val, self.head.head_start[sids].copy(), self.head.flushed_until[sids].copy())

    def head_snapshot(self, sids: Int64Array, start_ms: int, end_ms: int) -> HeadSnapshot:
        """Copies of the head's samples for ``sids`` in [start, end], plus the boundaries."""
        with self.lock:
            self.head.ensure_capacity(int(sids.max()) if len(sids) else 0)
            starts, counts, ts, val = self.head.window(sids, start_ms, end_ms)
            parts = [
                (s, ts[a : a + c], val[a : a + c])
                for s, a, c in zip(sids.tolist(), starts.tolist(), counts.tolist())
            ]
            return HeadSnapshot(
                parts,
                self.head.head_start[sids].copy(),
                self.head.flushed_until[sids].copy(),
            )


@dataclass(slots=True)
class HeadWindow:
    """Flat head samples of several series: series i owns ts[starts[i]:starts[i]+counts[i]]."""

    starts: Int64Array
    counts: Int64Array
    ts: Int64Array
    values: Float64Array
    head_start: Int64Array
    flushed_until: Int64Array


@dataclass(slots=True)
class HeadSnapshot:
    parts: list[tuple[int, Int64Array, Float64Array]]
    head_start: Int64Array
    flushed_until: Int64Array



def _sorted(sid: Int64Array, ts: Int64Array, val: Float64Array) -> tuple[Int64Array, Int64Array, Float64Array]:
    """The batch in (series, time) order. A batch of several scrapes is a few runs that are
    each in series order (and in time order per series): a stable sort by series merges those
    runs in little more than one pass, where a two-key sort would start from scratch."""
    if len(sid) > 1 and not bool(np.all(sid[1:] > sid[:-1])):
        order = np.argsort(sid, kind="stable")
        s, t = sid[order], ts[order]
        if bool(np.any((s[1:] == s[:-1]) & (t[1:] < t[:-1]))):
            order = np.lexsort((ts, sid))
            s, t = sid[order], ts[order]
        return s, t, val[order]
    return sid, ts, val
