"""Checkpoints on their own thread and connection, on PostgreSQL and on SQLite: appends go on
while one writes, a late sample behind its plan is refused, a failure loses nothing, and after a
restart every acknowledged sample is there exactly once. (SQLite's slices, reads that a commit
overlaps and the WAL file: test_background_sqlite.py.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from store import ManualClock, Reader, RejectReason, SampleBatch, Selector, SeriesKey, TimeSeriesStore
from store import background as background_module
from tests.conftest import T0
from tests.store.background_support import HOUR, KEYS, MIN, every_sample, opened, scrape, wait_for

__all__ = ["opened"]  # the fixture, used by name

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
    assert store.stats["flushed"] == 120 * len(KEYS)  # the samples below the 2 h boundary
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


def test_the_rollup_reads_are_told_every_series_a_background_checkpoint_commits(
        opened: Callable[..., TimeSeriesStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """Its commit is off the store's lock: the publish gate must hold back rollup reads of
    exactly the series it flushed (once for the whole plan, or slice by slice on SQLite)."""
    store = opened(ManualClock(T0))
    begun: list[int] = []
    real_begin = store.publish_gate.begin

    def begin(sids: np.ndarray) -> None:
        begun.extend(np.asarray(sids).tolist())
        real_begin(sids)

    monkeypatch.setattr(store.publish_gate, "begin", begin)
    start = T0 - T0 % (2 * HOUR)
    for i in range(126):
        scrape(store, start + i * MIN, float(i))
    wait_for(lambda: store.stats["checkpoints"] == 1)
    assert sorted(set(begun)) == sorted(store.resolve(KEYS).tolist())
    if store.backend.name != "sqlite":
        assert len(begun) == len(KEYS)  # one commit for the whole plan


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
