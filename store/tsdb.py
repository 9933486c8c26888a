"""The time-series store: head in memory, write-ahead table, chunks and rollups in SQL.

Write path (:meth:`TimeSeriesStore.append`), under one lock:

1. resolve series ids (new series inserted in the same transaction);
2. validate against the head, vectorised: exact duplicates are dropped, samples older than
   the out-of-order window (or below what is already in chunks) and conflicting duplicates
   are rejected with a typed reason;
3. write the accepted samples as one write-ahead row and commit -- only then is the batch
   acknowledged, so a killed process loses nothing it acknowledged;
4. add them to the head, and checkpoint when series are due.

A checkpoint (:mod:`store.checkpoint`) turns head samples below each series' cutoff into chunks
and rollups and deletes the write-ahead rows it emptied; at open the head is rebuilt from the rest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine, func, select

from store import schema
from store.active_series import ActiveSeries, stopped
from store.append_result import AppendResult as AppendResult
from store.append_result import RejectReason as RejectReason
from store.backend import Backend, backend_for, writer_cache
from store.background import BackgroundCheckpoints
from store.chunk_cache import ChunkCache
from store.clock import Clock
from store.cold_tier import ColdTier, MoveResult
from store.due import DueGate, cutoffs, due_after_marking
from store.group_commit import AppendQueue, Pending, combined, group_ids, per_owner
from store.head import EMPTY, NEVER, Head
from store.head_views import HeadSnapshot as HeadSnapshot
from store.head_views import HeadWindow as HeadWindow
from store.options import MINUTE_MS, StoreOptions
from store.publish_gate import PublishGate
from store.rollup_cache import RollupCache
from store.series_index import SeriesIndex
from store.types import Float64Array, Int64Array, SampleBatch, SeriesKey
from store.validation import ACCEPT as _ACCEPT
from store.validation import DUPLICATE as _DUPLICATE
from store.validation import REASONS as _REASONS
from store.validation import sort_order, validate
from store.wal import decode_wal, encode_wal
from store.wal_ledger import WalLedger

log = logging.getLogger(__name__)


class TimeSeriesStore:
    """Owns the head, the series index and the write connection of one database.

    One writer process per database: the head and the write-ahead tail belong to it.
    ``read_only`` opens rebuild the head from the write-ahead table but never write, which
    is how a second process (the CLI's ``query``) sees data the writer has not flushed yet.
    """

    def __init__(self, engine: Engine, clock: Clock, options: StoreOptions | None = None, *,
                 read_only: bool = False) -> None:
        self.engine = engine
        self.clock = clock
        self.options = options or StoreOptions()
        self.read_only = read_only
        self.backend: Backend = backend_for(engine.dialect.name)
        self.head = Head()
        self.rollup_cache = RollupCache(self.options.rollup_cache_rows)
        self.chunk_cache = ChunkCache(self.options.chunk_cache_bytes)
        self.flush_epoch = 0  # checkpoints and retention passes: a cache fill begun before one is not kept
        self.index = SeriesIndex()
        self.lock = threading.RLock()
        self.publish_gate = PublishGate(self.lock, lambda sids: self.head.flushed_until[sids])  # see its module
        # Taken before ``lock``: one checkpoint at a time, inline or in the background.
        self.checkpoint_lock = threading.Lock()
        self.last_wal_id = 0
        self.wal_ledger = WalLedger()  # which write-ahead rows a checkpoint may delete
        # While a background checkpoint writes its plan: per series, the cutoff below which new
        # samples are refused as too old (None when none is in flight).
        self.pending_floor: Int64Array | None = None
        self.background: BackgroundCheckpoints | None = None
        self._queue = AppendQueue()
        self.appending = 0
        self._appending_lock = threading.Lock()
        self.cold: ColdTier | None = ColdTier(self.options.cold_url) if self.options.cold_url else None
        self._last_cold_ms = NEVER
        self._conn: Any = None
        self._due_since: float | None = None
        self.due_gate = DueGate(self.options.chunk_range_ms, self.options.out_of_order_window_ms,
                                self.options.idle_flush_ms)
        self._pressure_at = self.options.max_head_samples
        self._stopped_check_at = float("-inf")
        self._last_retention_ms = NEVER
        self.stats = {"appended": 0, "duplicates": 0, "rejected": 0, "checkpoints": 0, "flushed": 0,
                      "checkpoint_slices": 0}
        self._rejected: dict[RejectReason, int] = {reason: 0 for reason in RejectReason}
        self.active = ActiveSeries(self.head, self.options.max_series, self.options.idle_flush_ms)

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        with self.lock:
            with self.engine.connect() as conn:
                rows = conn.execute(select(schema.series.c.id, schema.series.c.metric, schema.series.c.labels))
                self.index.load((int(r[0]), str(r[1]), str(r[2])) for r in rows)
                self.head.ensure_capacity(self.index.max_id())
                last_end = select(schema.chunks.c.series_id, func.max(schema.chunks.c.end_ms))
                flushed = conn.execute(last_end.group_by(schema.chunks.c.series_id)).all()
                for sid, end_ms in flushed:
                    self.head.ensure_capacity(int(sid))
                    self.head.flushed_until[int(sid)] = int(end_ms) + 1
                    self.head.head_start[int(sid)] = int(end_ms) + 1
                replayed = 0
                for wal_id, payload in conn.execute(select(schema.wal.c.id, schema.wal.c.payload).order_by(schema.wal.c.id)):
                    sid, ts, val = decode_wal(payload)
                    self.wal_ledger.add(int(wal_id), int(ts.max()) if len(ts) else NEVER)
                    replayed += self._replay(sid, ts, val)
                    self.last_wal_id = max(self.last_wal_id, int(wal_id))
            if not self.read_only:
                self._conn = self.engine.raw_connection()
                # Where a thread checkpoints, its connection alone takes the writer's page cache:
                # this one then writes write-ahead rows and new series, and a reader's will do.
                if not self.options.background_checkpoints:
                    self.backend.tune_writer(self._conn)
                else:
                    self.background = BackgroundCheckpoints(self)
                    self.background.start(self._conn)
                    self.head.offload = self.background.request_merge
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
        if self.background is not None:
            self.head.offload = None
            self.background.stop()
            self.background = None
        with self.lock:
            if self._conn is not None:
                if flush:  # what is not checkpointed stays in write-ahead rows, replayed at open
                    self.checkpoint(force=self.options.checkpoint_on_close)
                self._conn.close()
                self._conn = None

    # -- write path --------------------------------------------------------------------------
    def append(self, batch: SampleBatch) -> AppendResult:
        """Store a batch; returns only once the accepted samples are committed.

        Group commit (:mod:`store.group_commit`): a batch waits in a queue while another append
        leads; the next leader writes every batch waiting by then as one write-ahead row in one
        transaction -- one commit (one fsync) for all of them, as PostgreSQL's own commit_delay
        groups commits. Alone, a batch is its own group."""
        if self._conn is None:
            raise RuntimeError("the store is not open for writing")
        if len(batch) == 0:
            return AppendResult()
        pending = self._queue.put(batch)
        with self._appending_lock:  # read by a background checkpoint, which gives way to appends
            self.appending += 1
        try:
            self._queue.wait_or_write(pending, self.lock, self._append_group)
        finally:
            with self._appending_lock:
                self.appending -= 1
        return pending.outcome()

    def _append_group(self, group: list[Pending]) -> None:
        now = self.clock.now_ms()
        try:
            with self.transaction() as cur:
                live, parts = group_ids(self, group, cur, now)
                if not live:
                    return
                sid, ts, val, owner = combined(parts)
                self.head.ensure_capacity(int(sid.max()))
                order = sort_order(sid, ts)
                if order is not None:
                    sid, ts, val, owner = sid[order], ts[order], val[order], owner[order]
                status = self._validate(sid, ts, val, now)
                accepted = status == _ACCEPT
                if not accepted.all():
                    sid, ts, val = sid[accepted], ts[accepted], val[accepted]
                if len(sid):
                    payload = encode_wal(sid, ts, val)
                    wal_id = self.backend.insert_wal(cur, now, len(sid), payload)
        except Exception as exc:  # nothing of the group committed: each of its callers gets the error
            for pending in group:
                pending.fail(exc)
            return
        if len(sid):
            self.last_wal_id = max(self.last_wal_id, wal_id)
            self.wal_ledger.add(wal_id, int(ts.max()))
            if self.background is not None:
                self.background.wal_written(len(payload))
        self.active.born(self.index.commit_new(), now)
        last, flushed = self.head.last_ts[sid], self.head.flushed_until[sid]
        fresh = bool(((last == NEVER) | (last < flushed)).any())  # not pending before (see DueGate)
        self.head.add(sid, ts, val)
        for pending, counts in zip(live, per_owner(status, owner, len(live), len(_REASONS) + 2)):
            result = AppendResult(accepted=int(counts[_ACCEPT]), duplicates=int(counts[_DUPLICATE]))
            result.rejected = {reason: int(counts[code]) for code, reason in _REASONS.items() if counts[code]}
            self.stats["appended"] += result.accepted
            self.stats["duplicates"] += result.duplicates
            self.stats["rejected"] += result.rejected_total
            for reason, count in result.rejected.items():
                self._rejected[reason] += count
            pending.succeed(result)
        if self._due_since is None and self.due_gate.skip(
            int(ts.max()) if len(ts) else None, int(ts.min()) if len(ts) else None, fresh, now
        ):
            self._maybe_checkpoint(search=False)
        else:
            self._maybe_checkpoint()

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

    def _validate(self, sid: Int64Array, ts: Int64Array, val: Float64Array, now_ms: int) -> npt.NDArray[np.int8]:
        return validate(self.head, self.options, self.pending_floor, sid, ts, val, now_ms)

    def rejected_by_reason(self) -> dict[str, int]:
        return {reason.value: count for reason, count in self._rejected.items()}

    # -- checkpoints and retention -----------------------------------------------------------
    def cutoffs(self, force: bool = False, pressure: bool = False) -> Int64Array:
        """Per series, the timestamp below which head samples should be in chunks (:func:`store.due.cutoffs`)."""
        stopped = self.stopped() if pressure and not force else None
        return cutoffs(self.head, self.options, self.clock.now_ms(), force, pressure, stopped)

    def _stopped_series_hold_samples(self) -> bool:
        """Over the bound, whether series that stopped still hold samples (looked at every 5 s at most)."""
        now = self.clock.monotonic()
        if now < self._stopped_check_at:
            return False
        self._stopped_check_at = now + 5.0
        return bool((self.stopped() & (self.head.first_ts != EMPTY)).any())

    def stopped(self) -> npt.NDArray[np.bool_]:
        """Series quiet for the out-of-order window (:func:`store.active_series.stopped`)."""
        return stopped(self.head, self.clock.now_ms(), max(self.options.out_of_order_window_ms, MINUTE_MS))

    def _due(self, pressure: bool = False) -> None:
        if self.background is not None:
            self.background.request(pressure)
        else:  # the append's lock is held; with no background thread nothing else checkpoints
            self._checkpoint_locked(False, pressure)

    def _maybe_checkpoint(self, search: bool = True) -> None:
        """Ask for a checkpoint if memory presses or series are due (``search``: look for due
        series; an append skips that where :class:`store.due.DueGate` shows none can be)."""
        if self.head.samples > self.options.max_head_samples and self._stopped_series_hold_samples():
            self._due(pressure=True)
            return
        if self.head.samples > self._pressure_at:
            self._wait_for_growth()  # until the checkpoint is applied: not asked again per append
            return self._due(pressure=True)
        if not search:
            return
        n_due, n_pending, marked = due_after_marking(self.head, self.cutoffs())
        self.flush_epoch += marked > 0
        if n_due == 0:
            self._due_since = None
            self.due_gate.learn(self.head.last_ts, self.head.flushed_until)
            return
        self.due_gate.forget()
        now = self.clock.monotonic()
        if self._due_since is None:
            self._due_since = now
        waited_ms = (now - self._due_since) * 1000
        if n_due == n_pending or waited_ms >= self.options.checkpoint_grace_ms:
            self._due()

    def retain_ms(self, pressure: bool) -> int:
        """How long flushed samples stay in the head after a checkpoint."""
        return self.options.out_of_order_window_ms if pressure else self.options.head_retain_ms

    def checkpoint_planned(self, pressure: bool) -> None:
        """What the triggers remember once a checkpoint took its plan (store lock held)."""
        if not pressure:
            self._pressure_at = self.options.max_head_samples
        self._due_since = None

    def checkpoint_applied(self, pressure: bool) -> None:
        """After an early checkpoint (store lock held), the next waits for the head to grow a quarter
        past what it left, not past what set it off (then the trigger climbs with the head)."""
        if pressure:
            self._wait_for_growth()

    def _wait_for_growth(self) -> None:  # the next early checkpoint: a quarter past the head now
        self._pressure_at = max(self.options.max_head_samples, int(self.head.samples * 1.25))

    def checkpoint(self, force: bool = False, pressure: bool = False) -> int:
        """Flush due head samples to chunks and rollups, in the calling thread; returns the
        samples flushed (after one in the background, if one is in flight)."""
        with self.checkpoint_lock, self.lock:
            return self._checkpoint_locked(force, pressure)

    def _checkpoint_locked(self, force: bool, pressure: bool) -> int:
        from store.checkpoint import run_checkpoint

        with self.lock:
            if self._conn is None:
                return 0
            # opened for a checkpointing thread, the append connection keeps a reader's cache
            # (see open); it takes the writer's for this one, a stop's too (the thread gone)
            with writer_cache(self.backend, self._conn, lent=self.options.background_checkpoints):
                flushed, slices = run_checkpoint(self, self.cutoffs(force=force, pressure=pressure),
                                                 self.retain_ms(pressure), self.stopped() if pressure else None)
            self.checkpoint_planned(pressure)
            self.checkpoint_applied(pressure)
            self.stats["checkpoints"] += bool(flushed)
            self.stats["flushed"] += flushed
            self.stats["checkpoint_slices"] += slices
            return flushed

    def maintain(self) -> None:
        """Periodic work for a background loop: idle flushes, retention, cold-tier moves."""
        with self.lock:
            if self._conn is None:
                return
            self._maybe_checkpoint()
            now = self.clock.now_ms()
            if now - self._last_retention_ms >= self.options.retention_interval_ms:
                from store.retention import apply_retention

                apply_retention(self, now)
                self._last_retention_ms = now
        if self.cold is not None and now - self._last_cold_ms >= self.options.cold_interval_ms:
            self.tier_cold(now)

    def tier_cold(self, now_ms: int) -> MoveResult:
        """Move what is past ``cold_after`` to the cold tier (see :func:`store.cold_tier.tier_cold`)."""
        from store.cold_tier import tier_cold

        if self.cold is None or self._conn is None:
            return MoveResult()
        self._last_cold_ms = now_ms
        return tier_cold(self, self.cold, now_ms)

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
            return HeadSnapshot(parts, self.head.head_start[sids].copy(), self.head.flushed_until[sids].copy())
