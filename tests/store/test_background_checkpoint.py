"""Checkpoints on their own thread and connection, on PostgreSQL and on SQLite (where each
slice commits on its own): appends go on while one writes, a late sample behind its plan is
refused, a failure loses nothing, reads that overlap a commit are exact, and after a restart
every acknowledged sample is there exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from store import (
    ManualClock,
    RangeQuery,
    Reader,
    RejectReason,
    SampleBatch,
    Selector,
    SeriesKey,
    StoreOptions,
    TimeSeriesStore,
)
from store import background as background_module
from store.engine import create_store_engine
from tests.conftest import T0

MIN = 60_000
HOUR = 3_600_000
KEYS = [SeriesKey.of("gpu_util", gpu=str(i), host="node-a") for i in range(20)]


@pytest.fixture
def opened(store_url: str) -> Iterator[Callable[..., TimeSeriesStore]]:
    stores: list[TimeSeriesStore] = []

    def open_store(clock: ManualClock, background: bool = True) -> TimeSeriesStore:
        store = TimeSeriesStore(create_store_engine(store_url), clock,
                                StoreOptions(background_checkpoints=background, checkpoint_grace_ms=0))
        store.open()
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        store.close(flush=False)
        store.engine.dispose()


def held_writes(monkeypatch: pytest.MonkeyPatch, written: bool = False,
                backend: str = "postgresql") -> tuple[threading.Event, threading.Event]:
    """Background checkpoints hold before (or, ``written``, after) writing their plan until
    ``release`` is set; ``writing`` is set once one is there. On SQLite "after" is once the
    slices are committed (before the write-ahead rows' deletion, a write that holds SQLite's
    one write lock until it commits, as every SQLite write does)."""
    writing, release = threading.Event(), threading.Event()
    real_write = background_module.write_checkpoint
    if written and backend == "sqlite":
        real_after = background_module.SlicePublisher.after

        def held_after(self: Any, sids: Any) -> None:
            real_after(self, sids)
            writing.set()
            assert release.wait(20)

        monkeypatch.setattr(background_module.SlicePublisher, "after", held_after)
        return writing, release

    def held(*args: Any) -> None:
        if written:
            real_write(*args)
        writing.set()
        assert release.wait(20)
        if not written:
            real_write(*args)

    monkeypatch.setattr(background_module, "write_checkpoint", held)
    return writing, release


def scrape(store: TimeSeriesStore, ts: int, value: float) -> Any:
    store.clock.set(ts)  # type: ignore[attr-defined]
    return store.append(SampleBatch.one_per_key(KEYS, ts, np.full(len(KEYS), value)))


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def every_sample(store: TimeSeriesStore) -> dict[str, tuple[list[int], list[float]]]:
    return {s.key.get("gpu") or "": (s.ts_ms.tolist(), s.values.tolist())
            for s in Reader(store).raw(Selector("gpu_util"), 0, 2**62)}


def test_appends_go_on_while_a_checkpoint_writes_and_nothing_is_lost_or_doubled(
        opened: Callable[..., TimeSeriesStore], monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(T0)
    store = opened(clock)
    assert store.background is not None
    writing, release = held_writes(monkeypatch, written=True, backend=store.backend.name)
    start = T0 - T0 % (2 * HOUR)
    times = [start + i * MIN for i in range(130)]  # past the 2 h chunk boundary (+ the 5 min window)
    for i, ts in enumerate(times[:126]):
        scrape(store, ts, float(i))
    assert writing.wait(20), "no checkpoint started at the chunk boundary"
    # The checkpoint is writing (off the lock): appends are acknowledged meanwhile.
    began = time.perf_counter()
    for i, ts in enumerate(times[126:], start=126):
        assert scrape(store, ts, float(i)).accepted == len(KEYS)
    assert time.perf_counter() - began < 5
    assert store.stats["checkpoints"] == 0
    release.set()
    wait_for(lambda: store.stats["checkpoints"] == 1)
    assert store.pending_floor is None
    expected = ([*times], [float(i) for i in range(130)])
    assert all(v == expected for v in every_sample(store).values())
    with store.engine.connect() as conn:
        chunked = conn.execute(text("SELECT COALESCE(SUM(n), 0) FROM chunks")).scalar_one()
    assert chunked == 120 * len(KEYS)  # the first two hours, once

    store.close(flush=False)  # as if killed: what is in SQL is all there is
    again = opened(ManualClock(times[-1]))
    got = every_sample(again)
    assert len(got) == len(KEYS) and all(v == expected for v in got.values())


def test_a_late_sample_behind_a_planned_cutoff_is_refused_while_the_checkpoint_writes(
        opened: Callable[..., TimeSeriesStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle series is flushed whole (cutoff just past its newest sample): a sample inside
    its out-of-order window that arrives while that plan is written would land below the
    cutoff, in neither the chunk nor the write-ahead rows kept: refused as too old."""
    start = T0 - T0 % (2 * HOUR)
    clock = ManualClock(start)
    store = opened(clock)
    writing, release = held_writes(monkeypatch)
    idle = SeriesKey.of("gpu_util", gpu="idle", host="node-b")
    for i in range(5):
        clock.set(start + i * MIN)
        store.append(SampleBatch.one_per_key([idle], start + i * MIN, np.asarray([float(i)])))
    for i in range(5, 70):
        scrape(store, start + i * MIN, float(i))  # an hour on, the idle one is due whole
    assert writing.wait(20)
    late = store.append(SampleBatch.one_per_key([idle], start + 3 * MIN + 30_000, np.asarray([-1.0])))
    assert late.rejected == {RejectReason.TOO_OLD: 1}
    release.set()
    wait_for(lambda: store.stats["checkpoints"] == 1)
    assert store.append(SampleBatch.one_per_key([idle], start + 3 * MIN + 30_000, np.asarray([-1.0]))).rejected == {
        RejectReason.TOO_OLD: 1}  # the same answer once it is done
    store.close(flush=False)
    again = opened(ManualClock(start + 70 * MIN))
    idle_samples = Reader(again).raw(Selector("gpu_util", ()), 0, 2**62)
    got = [s for s in idle_samples if s.key.get("gpu") == "idle"]
    assert got[0].ts_ms.tolist() == [start + i * MIN for i in range(5)] and got[0].values.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_failed_background_checkpoint_keeps_everything_and_the_next_one_succeeds(
        opened: Callable[..., TimeSeriesStore], monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(T0)
    store = opened(clock)
    assert store.background is not None
    real_write = background_module.write_checkpoint
    calls = {"n": 0}

    def failing_once(*args: Any) -> None:
        calls["n"] += 1
        real_write(*args)
        if calls["n"] == 1:  # written, then the connection fails before commit
            raise ConnectionError("server closed the connection unexpectedly")

    monkeypatch.setattr(background_module, "write_checkpoint", failing_once)
    start = T0 - T0 % (2 * HOUR)
    times = [start + i * MIN for i in range(126)]
    for i, ts in enumerate(times):
        scrape(store, ts, float(i))
    wait_for(lambda: store.background is not None and store.background.failures == 1)
    assert "server closed the connection" in store.background.last_error
    assert store.pending_floor is None and store.stats["checkpoints"] == 0
    # PostgreSQL: one transaction, rolled back whole. SQLite: the one slice (every series) had
    # committed and its marks moved; only the write-ahead rows' deletion was lost.
    committed = 120 * len(KEYS) if store.backend.name == "sqlite" else 0
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT COALESCE(SUM(n), 0) FROM chunks")).scalar_one() == committed
    scrape(store, times[-1] + MIN, 126.0)  # the next append asks again
    expected = ([*times, times[-1] + MIN], [float(i) for i in range(127)])
    assert all(v == expected for v in every_sample(store).values())
    if committed:
        # Nothing left below the boundary: the next checkpoint comes with the next boundary.
        assert store.checkpoint(force=True) == 7 * len(KEYS)
    else:
        wait_for(lambda: store.stats["checkpoints"] == 1)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT COALESCE(SUM(n), 0) FROM chunks")).scalar_one() in (120 * len(KEYS),
                                                                                           127 * len(KEYS))
    assert all(v == expected for v in every_sample(store).values())
    store.close(flush=False)
    assert all(v == expected for v in every_sample(opened(ManualClock(times[-1]))).values())


def test_an_explicit_checkpoint_waits_for_the_one_in_flight(opened: Callable[..., TimeSeriesStore],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(T0)
    store = opened(clock)
    writing, release = held_writes(monkeypatch)
    start = T0 - T0 % (2 * HOUR)
    for i in range(126):
        scrape(store, start + i * MIN, float(i))
    assert writing.wait(20)
    done = threading.Event()
    flushed: list[int] = []
    explicit = threading.Thread(target=lambda: (flushed.append(store.checkpoint(force=True)), done.set()))
    explicit.start()
    assert not done.wait(0.3)  # it waits for the background one
    release.set()
    explicit.join(20)
    assert flushed == [6 * len(KEYS)]  # the tail beyond the background's cutoff
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one() == 0
        assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 126 * len(KEYS)


def test_a_background_checkpoint_gives_way_to_appends_in_flight_but_not_forever(
        opened: Callable[..., TimeSeriesStore]) -> None:
    store = opened(ManualClock(T0))
    assert store.background is not None
    began = time.perf_counter()
    store.background._give_way()
    assert time.perf_counter() - began < 0.05  # nothing in flight: no wait
    store.appending = 1  # an append that never ends
    began = time.perf_counter()
    store.background._give_way()
    assert background_module.GIVE_WAY_MAX_S <= time.perf_counter() - began < background_module.GIVE_WAY_MAX_S + 0.2
    store.appending = 0


def test_the_background_thread_seals_the_head_off_the_appends(
    opened: Callable[..., TimeSeriesStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the seal threshold an append asks the thread; the thread merges the pending
    batches into a block and puts it in place, and reads see every sample once."""
    import store.head as head_module

    monkeypatch.setattr(head_module, "_SEAL_PENDING", 100)
    monkeypatch.setattr(head_module, "_OFFLOAD_PENDING", 10_000)
    clock = ManualClock(T0)
    store = opened(clock)
    ids = store.resolve(KEYS)
    merged = threading.Event()
    real_adopt = head_module.Head.adopt

    def adopt(self: Any, work: Any, block: Any) -> bool:
        assert threading.current_thread().name == "store-checkpoints"
        done = real_adopt(self, work, block)
        merged.set()
        return done

    monkeypatch.setattr(head_module.Head, "adopt", adopt)
    for j in range(6):  # 120 samples: one seal due
        clock.set(T0 + j * 15_000)
        store.append(SampleBatch.one_per_key(KEYS, T0 + j * 15_000, np.full(len(KEYS), float(j)), ids))
    assert merged.wait(30)
    with store.lock:
        frozen = store.head.frozen()
    assert len(frozen.blocks) == 1 and sum(len(b) for b in frozen.blocks) >= 100
    got = Reader(store).raw(Selector("gpu_util"), T0, T0 + HOUR)
    assert [s.values.tolist() for s in got] == [[float(j) for j in range(6)]] * len(KEYS)


def test_a_failed_background_merge_is_counted_and_leaves_the_head_as_it_was(
    opened: Callable[..., TimeSeriesStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    import store.head as head_module

    monkeypatch.setattr(head_module, "_SEAL_PENDING", 100)
    monkeypatch.setattr(head_module, "_OFFLOAD_PENDING", 10_000)
    real_merge = head_module.SealWork.merge
    calls: list[int] = []

    def failing_once(self: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("no room for the merged block")
        return real_merge(self)

    monkeypatch.setattr(head_module.SealWork, "merge", failing_once)
    clock = ManualClock(T0)
    store = opened(clock)
    ids = store.resolve(KEYS)

    def append(j: int) -> None:
        clock.set(T0 + j * 15_000)
        store.append(SampleBatch.one_per_key(KEYS, T0 + j * 15_000, np.full(len(KEYS), float(j)), ids))

    for j in range(5):  # 100 samples pending: one merge asked for (a sixth append would ask again)
        append(j)
    deadline = time.monotonic() + 30
    while store.background is not None and store.background.failures == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.background is not None and store.background.failures == 1
    assert "MemoryError: no room" in store.background.last_error
    with store.lock:
        assert store.head.frozen().blocks == ()  # nothing adopted, nothing lost
    append(5)  # asks again: this time the merge goes through
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with store.lock:
            if store.head.frozen().blocks:
                break
        time.sleep(0.01)
    with store.lock:
        assert len(store.head.frozen().blocks) == 1
    got = Reader(store).raw(Selector("gpu_util"), T0, T0 + HOUR)
    assert [s.values.tolist() for s in got] == [[float(j) for j in range(6)]] * len(KEYS)


def counted(store: TimeSeriesStore, start: int, end: int) -> tuple[float, int]:
    """Samples in [start, end) of every series: counted from hourly rollups plus the head's
    tail (the read a checkpoint can race), and from the raw samples."""
    reader = Reader(store)
    rolled = reader.range(RangeQuery(Selector("gpu_util"), start, end - 1, HOUR, "count"))  # hours from start
    assert rolled and all(r.source.startswith("rollup") for r in rolled)
    raw = sum(int(((s.ts_ms >= start) & (s.ts_ms < end)).sum()) for s in reader.raw(Selector("gpu_util"), start, end))
    return float(sum(np.nansum(r.values) for r in rolled)), raw


def test_on_sqlite_each_slice_commits_on_its_own_and_reads_meanwhile_are_exact(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background_module, "BACKGROUND_SLICE_SAMPLES", 120)  # one series a slice
    store = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(T0),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    store.open()
    real_after = background_module.SlicePublisher.after
    third, release = threading.Event(), threading.Event()
    slices: list[int] = []

    def held_after(self: Any, sids: Any) -> None:
        real_after(self, sids)
        slices.append(len(set(sids.tolist())))
        if len(slices) == 3:
            third.set()
            assert release.wait(20)

    monkeypatch.setattr(background_module.SlicePublisher, "after", held_after)
    try:
        start = T0 - T0 % (2 * HOUR)
        times = [start + i * MIN for i in range(126)]
        for i, ts in enumerate(times):
            scrape(store, ts, float(i))
        assert third.wait(20)
        # Three slices committed (their own transactions): the rest is not written yet.
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT COALESCE(SUM(n), 0) FROM chunks")).scalar_one() == 3 * 120
        began = time.perf_counter()
        assert scrape(store, times[-1] + MIN, 126.0).accepted == len(KEYS)  # not held by the checkpoint
        assert time.perf_counter() - began < 2
        # Three series read their first two hours from rollups, the rest from the head.
        rolled, raw = counted(store, start, start + 3 * HOUR)
        assert rolled == raw == 127 * len(KEYS)
        release.set()
        wait_for(lambda: store.stats["checkpoints"] == 1)
        assert slices == [1] * len(KEYS)
        assert counted(store, start, start + 3 * HOUR) == (127 * len(KEYS), 127 * len(KEYS))
        expected = ([*times, times[-1] + MIN], [float(i) for i in range(127)])
        assert all(v == expected for v in every_sample(store).values())
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 120 * len(KEYS)
    finally:
        release.set()
        store.close(flush=False)  # as if killed
    again = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(times[-1]), StoreOptions())
    again.open()
    try:
        assert all(v == expected for v in every_sample(again).values())
    finally:
        again.close(flush=False)


def test_a_sqlite_checkpoint_killed_between_slices_loses_and_doubles_nothing(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices committed before the process died keep their chunks; replay takes from the
    write-ahead rows only what is past them, and the next checkpoint writes the rest once."""
    monkeypatch.setattr(background_module, "BACKGROUND_SLICE_SAMPLES", 120)
    store = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(T0),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    store.open()
    real_after = background_module.SlicePublisher.after
    died = threading.Event()

    def dying_after(self: Any, sids: Any) -> None:
        if died.is_set():  # dies here: the slice in progress is rolled back, nothing more is written
            raise RuntimeError("killed between slices")
        real_after(self, sids)
        if len(set(self.plan.flush[0].tolist())) and int(sids[0]) == int(self.plan.flush[0][5 * 120]):
            died.set()

    monkeypatch.setattr(background_module.SlicePublisher, "after", dying_after)
    start = T0 - T0 % (2 * HOUR)
    times = [start + i * MIN for i in range(126)]
    for i, ts in enumerate(times):
        scrape(store, ts, float(i))
    wait_for(died.is_set)
    time.sleep(0.2)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 6 * 120  # six slices committed
        assert conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one() == 126  # every write-ahead row kept
    store.close(flush=False)
    monkeypatch.undo()
    again = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(times[-1]),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    again.open()
    try:
        expected = ([*times], [float(i) for i in range(126)])
        assert all(v == expected for v in every_sample(again).values())
        again.checkpoint(force=True)
        with again.engine.connect() as conn:
            assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 126 * len(KEYS)
            assert conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one() == 0
            assert conn.execute(text("SELECT COUNT(DISTINCT series_id || '-' || start_ms) FROM chunks")).scalar_one() == \
                conn.execute(text("SELECT COUNT(*) FROM chunks")).scalar_one()
        assert all(v == expected for v in every_sample(again).values())
        assert counted(again, start, start + 3 * HOUR) == (126 * len(KEYS), 126 * len(KEYS))
    finally:
        again.close(flush=False)


def test_a_rollup_read_that_a_commit_overlaps_is_read_again(opened: Callable[..., TimeSeriesStore],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint commits between the read's snapshot of the head and its rollup rows: the
    read sees the marks moved and reads again instead of counting those samples twice."""
    store = opened(ManualClock(T0), background=False)
    start = T0 - T0 % (2 * HOUR)
    for i in range(90):
        scrape(store, start + i * MIN, float(i))
    store.checkpoint(force=True)
    for i in range(90, 150):
        scrape(store, start + i * MIN, float(i))
    real_snapshot = store.head_snapshot
    snapshots: list[int] = []

    def racing_snapshot(*args: Any) -> Any:
        snap = real_snapshot(*args)
        snapshots.append(1)
        if len(snapshots) == 1:
            store.checkpoint(force=True)  # commits the rows of the head's tail the snapshot holds
        return snap

    monkeypatch.setattr(store, "head_snapshot", racing_snapshot)
    rolled = Reader(store).range(RangeQuery(Selector("gpu_util"), start, start + 3 * HOUR - 1, HOUR, "count"))
    assert len(snapshots) == 2  # the first read raced the commit and was read again
    assert all(r.values.tolist() == [60.0, 60.0, 30.0] for r in rolled) and len(rolled) == len(KEYS)
    assert counted(store, start, start + 3 * HOUR) == (150 * len(KEYS), 150 * len(KEYS))


def test_a_late_checkpoint_writes_one_chunk_per_series_and_chunk_range(opened: Callable[..., TimeSeriesStore],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that runs hours late (behind a backfill, after a restart) cuts the same
    2 h chunks as checkpoints at every boundary would have: cold-tier moves and chunk reads
    do not depend on when checkpoints ran."""
    store = opened(ManualClock(T0), background=False)
    monkeypatch.setattr(store, "_maybe_checkpoint", lambda: None)  # nothing checkpoints until asked
    start = T0 - T0 % (2 * HOUR)
    for i in range(7 * 60):  # seven hours a minute apart
        scrape(store, start + i * MIN, float(i))
    assert store.checkpoint(force=True) == 7 * 60 * len(KEYS)
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT series_id, start_ms, end_ms, n FROM chunks ORDER BY series_id, start_ms")).all()
    per_series = [(r.start_ms - start, r.end_ms - start, r.n) for r in rows if r.series_id == rows[0].series_id]
    assert per_series == [(0, 2 * HOUR - MIN, 120), (2 * HOUR, 4 * HOUR - MIN, 120), (4 * HOUR, 6 * HOUR - MIN, 120),
                          (6 * HOUR, 7 * HOUR - MIN, 60)]
    assert len(rows) == 4 * len(KEYS)
    expected = ([start + i * MIN for i in range(7 * 60)], [float(i) for i in range(7 * 60)])
    assert all(v == expected for v in every_sample(store).values())


def test_on_sqlite_the_wal_file_is_checkpointed_by_the_background_thread_not_by_appends(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's automatic WAL checkpoint ran inside whichever commit crossed 16 MiB, an append's
    included; with background checkpoints the store's connections leave it to the thread."""
    monkeypatch.setattr(background_module, "WAL_CHECKPOINT_BYTES", 1)  # after every append
    engine = create_store_engine(sqlite_url)
    store = TimeSeriesStore(engine, ManualClock(T0), StoreOptions(background_checkpoints=True))
    store.open()
    assert store.background is not None
    real = background_module.BackgroundCheckpoints.checkpoint_wal
    threads: list[str] = []

    def recorded(self: Any) -> int:
        threads.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(background_module.BackgroundCheckpoints, "checkpoint_wal", recorded)

    def autocheckpoint(conn: Any) -> int:
        cur = conn.cursor()
        try:
            cur.execute("PRAGMA wal_autocheckpoint")
            return int(cur.fetchone()[0])
        finally:
            cur.close()

    try:
        assert autocheckpoint(store._conn) == 0
        for i in range(3):
            scrape(store, T0 + i * MIN, float(i))
        wait_for(lambda: len(threads) >= 1)
        assert set(threads) == {"store-checkpoints"}
    finally:
        store.close()
    with engine.connect() as conn:  # the pooled connections are back to automatic checkpoints
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one() == 4096
    raw = engine.raw_connection()
    try:
        assert autocheckpoint(raw) == 4096
    finally:
        raw.close()
        engine.dispose()
