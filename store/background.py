"""Checkpoints off the append path: a thread with its own database connection.

Why: a checkpoint encodes and writes every due sample (at a 2 h boundary, every series'
two hours); inline, under the store's lock, each append waited for all of it. Here the
store's lock is held only to take the plan from the head and, at the end, to commit and move
the head's marks -- appends (and reads of the head) go on while the chunks and rollups are
written. Meanwhile a sample below a planned cutoff is refused as too old, as it would be
once the checkpoint is done, so nothing lands in the head behind the plan's back.

The same thread merges the head's pending batches into blocks and its blocks into larger
ones (:meth:`BackgroundCheckpoints.merge_head`), also off the lock.

On SQLite, which has one writer per database, a checkpoint's single transaction on a second
connection would hold the appends' write-ahead inserts back for all of it. There each slice
(whole series, sized to about 5 ms of writing) commits on its own (:class:`SlicePublisher`),
so an append waits for at most one slice's write. The store stays consistent at every commit:
a slice holds each of its series' chunks and rollups whole, its series' flushed marks move
under the store's lock together with the commit, and after a crash between slices replay takes
from the write-ahead rows only what is past each series' newest chunk -- every sample is read
exactly once.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from store.checkpoint import Plan, apply_checkpoint, cache_written, plan_checkpoint, prepare, write_checkpoint
from store.engine import SQLITE_AUTOCHECKPOINT_PAGES
from store.head import NEVER
from store.slice_sizes import TimedSlices
from store.types import Int64Array

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore

log = logging.getLogger(__name__)


# Smaller slices than inline, sized by time (store.slice_sizes): an append that starts while one
# is written shares the interpreter with it (the GIL) and, on SQLite, waits for its commit for
# the write lock, for at most about one slice before the checkpoint gives way. The first slice
# of a checkpoint is the least; none is larger than the most. Measured (store benchmark, pressure
# and stalls sections): 5 ms makes slices of ~10,700 samples here, checkpoint thread 0.68 CPU-s
# per M flushed against 0.76-0.80 at 5,000 samples, append p99 through a 2 h boundary at 100 k
# series 18.5 ms (PostgreSQL) and 13.6 ms (SQLite); 10 ms made ~22,000, 0.59-0.66, but 23.7 and
# 20.4 ms, with one PostgreSQL round at 71 ms.
SLICE_TARGET_S = 0.005
BACKGROUND_SLICE_SAMPLES = 5_000
BACKGROUND_SLICE_MOST = 50_000
_PLAN_SEALS_FROM = 200_000  # pending samples sealed off the lock before a plan (~10 ms inline below)
WAL_CHECKPOINT_BYTES = 4 << 20  # SQLite: appends' write-ahead payload between WAL checkpoints
# SQLite: a background checkpoint's samples between WAL checkpoints (~4 MiB of pages at the ~8 B a
# sample that an early checkpoint's chunks, rollup spans and their index entries take). After
# every slice of 5,000 samples, an early checkpoint at 100 k series ran ~2,600 of them, each with
# its syncs: 5.7 % of `infermeter up`'s CPU.
WAL_CHECKPOINT_SLICE_SAMPLES = 500_000
GIVE_WAY_MAX_S = 0.25  # the longest a checkpoint waits between slices for appends to finish


class BackgroundCheckpoints:
    """Runs the checkpoints :meth:`request` asks for, one at a time, on its own thread."""

    def __init__(self, store: TimeSeriesStore) -> None:
        self.store = store
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pressure = False
        self._checkpoint_wanted = False
        self._merge_wanted = False
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self.failures = 0
        self.last_error = ""
        self._sqlite_writers: list[Any] = []
        self._wal_bytes = 0
        self._wal_wanted = False

    def start(self, writer: Any = None) -> None:
        """``writer``: the store's own write connection. On SQLite neither it nor this thread's
        connection checkpoints the WAL file automatically any more: this thread does, between
        appends (:meth:`checkpoint_wal`)."""
        self._conn = self.store.engine.raw_connection()
        self.store.backend.tune_writer(self._conn)
        if self.store.backend.name == "sqlite":
            self._sqlite_writers = [c for c in (self._conn, writer) if c is not None]
            for conn in self._sqlite_writers:
                _set_autocheckpoint(conn, 0)
        self._thread = threading.Thread(target=self._loop, name="store-checkpoints", daemon=True)
        self._thread.start()

    def request(self, pressure: bool = False) -> None:
        self._pressure |= pressure
        self._checkpoint_wanted = True
        self._wake.set()

    def request_merge(self) -> None:
        """The head has a seal or a merge due (:meth:`store.head.Head.seal_work`)."""
        self._merge_wanted = True
        self._wake.set()

    def wal_written(self, nbytes: int) -> None:
        """An append wrote ``nbytes`` of write-ahead payload; on SQLite, every
        :data:`WAL_CHECKPOINT_BYTES` the WAL file is checkpointed here, not in an append."""
        if not self._sqlite_writers:
            return
        self._wal_bytes += nbytes
        if self._wal_bytes >= WAL_CHECKPOINT_BYTES:
            self._wal_bytes = 0
            self._wal_wanted = True
            self._wake.set()

    def checkpoint_wal(self) -> int:
        """SQLite: copy the committed pages of the WAL file into the database, right after the
        appends in flight (if any) finished.

        Why here: with SQLite's automatic checkpoint, the commit that took the WAL past 16 MiB
        copied all of it and synced the files inside an append (40-80 ms every ~30 appends at
        100 k series); and an append that wrote the WAL while a checkpoint's commit synced it
        waited ~35 ms (both traced at a 2 h boundary). Passive: it never waits for a reader."""
        self._give_way()
        cur = self._conn.cursor()
        try:
            cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return int(cur.fetchone()[2])
        finally:
            cur.close()

    def stop(self) -> None:
        """Let a checkpoint in flight finish, then end the thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for conn in self._sqlite_writers:  # back to automatic checkpoints, as they came
            _set_autocheckpoint(conn, SQLITE_AUTOCHECKPOINT_PAGES)
        self._sqlite_writers = []
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._merge_wanted:
                self._merge_wanted = False
                self._guarded("merge", self.merge_head)
            if self._wal_wanted:
                self._wal_wanted = False
                self._guarded("WAL checkpoint", self.checkpoint_wal)
            if self._checkpoint_wanted:
                self._checkpoint_wanted = False
                pressure, self._pressure = self._pressure, False
                self._guarded("checkpoint", functools.partial(self.run, pressure))

    def _guarded(self, what: str, work: Callable[[], int]) -> None:
        """Run ``work``; a failure is counted and logged, and the next request retries (the
        write-ahead rows still hold everything; a failed merge leaves the head as it was)."""
        try:
            work()
        except Exception as exc:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("background %s failed", what)

    def _give_way(self) -> None:
        """Wait while appends are in flight: they run alone, not at half speed beside the
        checkpoint's encoding (a bounded wait, so a steady stream of appends cannot starve it)."""
        deadline = time.monotonic() + GIVE_WAY_MAX_S
        while self.store.appending and time.monotonic() < deadline:
            time.sleep(0.001)

    @property
    def native_id(self) -> int | None:
        """The thread's id for the operating system (its CPU in /proc), None when not running."""
        return None if self._thread is None else self._thread.native_id

    def merge_head(self, pending_from: int | None = None) -> int:
        """The head's due seals and merges, each merged off the lock and put in place under it
        (an append that sealed inline waited for all of it: ~100 ms at 2 M samples). Returns
        the merges adopted. ``pending_from``: seal pending batches from this many samples on
        (default: the head's own threshold)."""
        store = self.store
        adopted = 0
        with store.lock:
            work = store.head.seal_work(pending_from)
        while work is not None and not self._stop.is_set():
            block = work.merge()
            with store.lock:
                adopted += store.head.adopt(work, block)
                work = store.head.seal_work(pending_from)
        return adopted

    def run(self, pressure: bool = False) -> int:
        """One checkpoint on this connection; returns the samples flushed."""
        store = self.store
        with store.checkpoint_lock:
            # The plan seals what is pending under the lock: seal it here first, off the lock,
            # so that only the batches of the last moments are left for the plan.
            self.merge_head(pending_from=_PLAN_SEALS_FROM)
            with store.lock:
                plan = plan_checkpoint(store, store.cutoffs(pressure=pressure), store.retain_ms(pressure),
                                       store.stopped() if pressure else None)
                store.checkpoint_planned(pressure)
                if plan is None:
                    return 0
                floor = np.full(store.head.capacity, NEVER, np.int64)
                floor[plan.marked] = plan.cutoff[plan.marked]
                store.pending_floor = floor
            cur = self._conn.cursor()
            try:
                prepare(plan)
                publish = SlicePublisher(store, self._conn, plan, self.checkpoint_wal) if self._sqlite_writers else None
                sizes = TimedSlices(SLICE_TARGET_S, BACKGROUND_SLICE_SAMPLES, BACKGROUND_SLICE_MOST)
                write_checkpoint(store, cur, plan, self._give_way, sizes, publish)
                # Committed off the lock too: a large transaction's commit takes long enough to
                # show in append latency. Until the marks move, a raw read still takes these
                # samples from the head (it reads chunks only below head_start), and appends
                # below the plan are still refused by the pending floor. Rollup reads that
                # overlap the commit read again (store.publish_gate).
                # On SQLite the slices are committed and their marks moved: this commit deletes
                # write-ahead rows only. There the store's lock is never taken while this
                # connection holds SQLite's write lock: an append holding it may be waiting for
                # that write lock.
                if publish is None:
                    store.publish_gate.begin(plan.series_flushed())
                self._conn.commit()
                if publish is not None:
                    publish.copy_pages()
            except BaseException:
                self._conn.rollback()
                with store.lock:
                    store.pending_floor = None
                    store.publish_gate.end()
                    store.head.release()
                raise
            finally:
                cur.close()
            with store.lock:
                apply_checkpoint(store, plan)
                store.checkpoint_applied(pressure)
                store.pending_floor = None
                store.publish_gate.end()
                store.stats["checkpoints"] += 1
                store.stats["flushed"] += plan.samples
                store.stats["checkpoint_slices"] += plan.slices
            return plan.samples


class SlicePublisher:
    """SQLite: each slice of a background checkpoint is its own transaction; once it commits,
    its series' flushed marks move (see the module doc).

    Both ends are announced to the store's publish gate (:mod:`store.publish_gate`): the slice's
    series before it is written -- waiting there, not while holding SQLite's write lock, for a
    held read -- and the end in the critical section that moves their marks. The commit itself
    is off the store's lock: an append holds that lock while it waits for SQLite's write lock,
    which this connection holds until it commits. The rollup cache takes the slice's rows with
    the marks (:func:`store.checkpoint.cache_written`), so the final apply finds none left."""

    def __init__(self, store: TimeSeriesStore, conn: Any, plan: Plan, checkpoint_wal: Callable[[], int]) -> None:
        self.store, self.conn, self.plan, self.checkpoint_wal = store, conn, plan, checkpoint_wal
        self._since_wal_checkpoint = 0

    def before(self, sids: Int64Array) -> None:
        self.store.publish_gate.begin(np.unique(sids))

    def after(self, sids: Int64Array) -> None:
        store, plan = self.store, self.plan
        try:
            self.conn.commit()
        except BaseException:
            with store.lock:
                store.publish_gate.end()
            raise
        with store.lock:  # one critical section: a read sees the rows with their marks or neither
            store.head.mark_flushed(np.unique(sids), plan.cutoff)
            cache_written(store, plan)
            store.flush_epoch += 1
            store.publish_gate.end()
        self._since_wal_checkpoint += len(sids)
        if self._since_wal_checkpoint >= WAL_CHECKPOINT_SLICE_SAMPLES:
            self.copy_pages()

    def copy_pages(self) -> None:
        """Copy the slices' pages into the database file, between appends."""
        self._since_wal_checkpoint = 0
        self.checkpoint_wal()


def _set_autocheckpoint(conn: Any, pages: int) -> None:
    cur = conn.cursor()
    try:
        cur.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")
    finally:
        cur.close()
