"""Group commit: appends waiting for the store's lock are written by one of them, as one
write-ahead row in one transaction, with each caller's own result (both backends)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from store import Reader, RejectReason, SampleBatch, Selector, SeriesKey, StoreOptions
from store.append_result import AppendResult
from store.group_commit import AppendQueue, Pending
from tests.conftest import T0, StoreFactory


def _wait_queued(store: Any, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(store._queue._waiting) < n:
        assert time.monotonic() < deadline, "the appenders never queued"
        time.sleep(0.005)


def _wal_rows(store: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one())


def _run_queued(store: Any, lock: Any, threads: list[threading.Thread]) -> None:
    """Start ``threads`` one at a time while ``lock`` is held (a commit in progress), so the
    queue's order is the threads' order; then let them through and wait for every one."""
    with lock:
        for queued, thread in enumerate(threads, start=1):
            thread.start()
            _wait_queued(store, queued)
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)


def test_waiting_appends_share_one_commit_and_each_gets_its_own_result(make_store: StoreFactory) -> None:
    store = make_store(StoreOptions())
    keys = [[SeriesKey.of("gpu_util", gpu=str(g), host=f"node-{t}") for g in range(8)] for t in range(6)]
    shared = SeriesKey.of("fleet_up")  # new to every batch: created once
    results: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}

    def send(t: int) -> None:
        values = np.full(8, float(t))
        batch = SampleBatch.one_per_key([*keys[t], shared], T0, np.append(values, 1.0 if t < 3 else 2.0))
        try:
            results[t] = store.append(batch)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            errors[t] = exc

    def send_bad_ids() -> None:
        batch = SampleBatch.one_per_key(keys[0], T0 + 1, np.zeros(8), key_ids=np.full(8, 10**9))
        try:
            store.append(batch)
        except ValueError as exc:
            errors[99] = exc

    threads = [threading.Thread(target=send, args=(t,)) for t in range(6)] + [threading.Thread(target=send_bad_ids)]
    with store.lock:  # a commit in progress: everyone queues behind it
        # One at a time, so the queue's order is the threads' order: "first of the group" below
        # means thread 0 (started together, thread 1 sometimes queued ahead of it).
        for queued, thread in enumerate(threads, start=1):
            thread.start()
            _wait_queued(store, queued)
    for thread in threads:
        thread.join(10)

    assert set(errors) == {99} and "ids this store did not hand out" in str(errors[99])  # alone
    assert _wal_rows(store) == 1  # seven appends, one write-ahead row, one commit
    for t in range(6):
        result = results[t]
        if t == 0:  # first of the group: its fleet_up sample is the one kept
            assert (result.accepted, result.duplicates, result.rejected) == (9, 0, {})
        elif t < 3:  # the same value again: a duplicate
            assert (result.accepted, result.duplicates, result.rejected) == (8, 1, {})
        else:  # another value at the same time: a conflict, counted against this batch
            assert (result.accepted, result.rejected) == (8, {RejectReason.CONFLICT: 1})
    got = {s.key.get("host", "") + "/" + s.key.get("gpu", ""): s.values.tolist()
           for s in Reader(store).raw(Selector("gpu_util"), 0, 2**62)}
    assert got == {f"node-{t}/{g}": [float(t)] for t in range(6) for g in range(8)}
    assert [s.values.tolist() for s in Reader(store).raw(Selector("fleet_up"), 0, 2**62)] == [[1.0]]
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM series WHERE metric = 'fleet_up'")).scalar_one() == 1


def test_a_failed_group_commit_fails_every_batch_in_it_and_keeps_nothing(make_store: StoreFactory,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(StoreOptions())
    key = SeriesKey.of("gpu_util", gpu="0")
    store.append(SampleBatch.one_per_key([key], T0, np.asarray([1.0])))

    def broken(*_args: object) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(store.backend, "insert_wal", broken)
    errors: list[BaseException] = []

    def send(i: int) -> None:
        try:
            store.append(SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu=str(i + 1))], T0, np.asarray([2.0])))
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(3)]
    with store.lock:
        for thread in threads:
            thread.start()
        _wait_queued(store, 3)
    for thread in threads:
        thread.join(10)
    assert len(errors) == 3 and all("disk full" in str(e) for e in errors)
    monkeypatch.undo()
    assert [s.key.get("gpu") for s in Reader(store).raw(Selector("gpu_util"), 0, 2**62)] == ["0"]
    # the series the failed group would have created were forgotten: they are created afresh
    assert store.append(SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu="1")], T0, np.asarray([2.0]))).accepted == 1


class _CountingLock:
    """The store's lock, counting how often each thread takes it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.taken: dict[str, int] = {}

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        got = bool(self.inner.acquire(*args, **kwargs))
        if got:
            name = threading.current_thread().name
            self.taken[name] = self.taken.get(name, 0) + 1
        return got

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> _CountingLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def test_appends_written_by_another_return_without_taking_the_store_lock(make_store: StoreFactory) -> None:
    """Only the leader of a group takes the store's lock: the others learn from the queue that
    their batch is written (before, each took the lock in turn, a whole commit behind it, only
    to find its batch done, and the groups stayed small)."""
    store = make_store(StoreOptions())
    counting = _CountingLock(store.lock)
    store.lock = counting  # type: ignore[assignment]
    threads = [
        threading.Thread(
            target=store.append,
            args=(SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu=str(t))], T0, np.asarray([float(t)])),),
            name=f"sender-{t}",
        )
        for t in range(5)
    ]
    _run_queued(store, counting.inner, threads)  # the first sender leads and waits for the lock
    assert _wal_rows(store) == 1
    senders = {name: n for name, n in counting.taken.items() if name.startswith("sender-")}
    assert list(senders) == ["sender-0"], senders  # the leader alone
    got = {s.key.get("gpu"): s.values.tolist() for s in Reader(store).raw(Selector("gpu_util"), 0, 2**62)}
    assert got == {str(t): [float(t)] for t in range(5)}


def test_a_leader_that_fails_unexpectedly_fails_its_group_and_the_next_append_leads(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error the group's own handler does not catch reaches the leader's caller and every
    batch of its group; nobody waits forever, and the next append writes as usual."""
    store = make_store(StoreOptions())
    real = store._append_group

    def broken(group: Any) -> None:
        raise MemoryError("no room for the group")

    monkeypatch.setattr(store, "_append_group", broken)
    errors: dict[int, BaseException] = {}

    def send(t: int) -> None:
        try:
            store.append(SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu=str(t))], T0, np.asarray([1.0])))
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            errors[t] = exc

    threads = [threading.Thread(target=send, args=(t,)) for t in range(3)]
    _run_queued(store, store.lock, threads)
    assert isinstance(errors[0], MemoryError)  # the leader's caller: the error itself
    assert errors[1] is errors[0] and errors[2] is errors[0]  # and each batch of its group
    monkeypatch.setattr(store, "_append_group", real)
    assert store.append(SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu="9")], T0, np.asarray([1.0]))).accepted == 1


def test_an_append_under_the_store_lock_writes_at_once_while_a_leader_waits_for_that_lock(
    make_store: StoreFactory,
) -> None:
    """Re-entrant: a thread that holds the store's lock and appends must not wait for a leader
    that is itself waiting for that lock. It writes what is queued (the leader's batch too);
    the leader then finds its batch written."""
    store = make_store(StoreOptions())
    leader_result: dict[str, Any] = {}

    def lead() -> None:
        batch = SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu="0")], T0, np.asarray([1.0]))
        leader_result["r"] = store.append(batch)

    leader = threading.Thread(target=lead)
    with store.lock:
        leader.start()
        _wait_queued(store, 1)
        deadline = time.monotonic() + 10
        while not store._queue._leading:  # the leader has its turn and now waits for the lock
            assert time.monotonic() < deadline
            time.sleep(0.005)
        mine = store.append(SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu="1")], T0, np.asarray([2.0])))
        assert mine.accepted == 1
    leader.join(10)
    assert not leader.is_alive()
    assert leader_result["r"].accepted == 1
    assert _wal_rows(store) == 1  # both in the one write made under the held lock
    got = {s.key.get("gpu"): s.values.tolist() for s in Reader(store).raw(Selector("gpu_util"), 0, 2**62)}
    assert got == {"0": [1.0], "1": [2.0]}


def _one(gpu: int, ts: int = T0) -> SampleBatch:
    return SampleBatch.one_per_key([SeriesKey.of("gpu_util", gpu=str(gpu))], ts, np.asarray([float(gpu)]))


def test_after_a_group_the_next_leader_waits_for_as_many_batches(make_store: StoreFactory) -> None:
    """Commit delay: the senders a group settled append again one by one; the first of them
    leads and waits for the others instead of committing alone (the groups halved without it)."""
    store = make_store(StoreOptions())
    store._queue.gather_s = 30.0  # only the batches' arrival ends the wait here
    _run_queued(store, store.lock, [threading.Thread(target=store.append, args=(_one(g),)) for g in range(4)])
    assert _wal_rows(store) == 1
    late = [threading.Thread(target=store.append, args=(_one(g, T0 + 1000),)) for g in range(4)]
    for thread in late:  # they arrive apart, each well after the last one's commit would have ended
        thread.start()
        time.sleep(0.05)
    for thread in late:
        thread.join(10)
    assert not any(thread.is_alive() for thread in late)
    assert _wal_rows(store) == 2  # one more commit for all four
    got = {s.key.get("gpu"): s.values.tolist() for s in Reader(store).raw(Selector("gpu_util"), 0, 2**62)}
    assert got == {str(g): [float(g)] * 2 for g in range(4)}


class _SpyClock:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return time.monotonic()


def test_a_lone_appender_waits_at_most_once_and_never_alone(make_store: StoreFactory) -> None:
    store = make_store(StoreOptions())
    spy = _SpyClock()
    store._queue._clock = spy
    store._queue.gather_s = 0.05
    for i in range(3):  # alone from the start: no wait at all
        assert store.append(_one(0, T0 + i)).accepted == 1
    assert spy.calls == 0
    _run_queued(store, store.lock, [threading.Thread(target=store.append, args=(_one(g, T0 + 10),)) for g in range(3)])
    started = time.monotonic()
    assert store.append(_one(0, T0 + 20)).accepted == 1  # the group of three is gone: waits in vain once
    assert spy.calls > 0 and time.monotonic() - started < 10
    calls = spy.calls
    assert store.append(_one(0, T0 + 30)).accepted == 1  # its own group held one: no wait
    assert spy.calls == calls
    assert _wal_rows(store) == 3 + 1 + 2


def _settling(written: list[int]) -> Callable[[list[Pending]], None]:
    """A group writer that records each group's size and settles its batches."""

    def write(group: list[Pending]) -> None:
        written.append(len(group))
        for pending in group:
            pending.succeed(AppendResult())

    return write


def test_the_wait_for_the_group_never_holds_the_store_lock() -> None:
    """A gathering leader waits on the queue, not under the store's lock: those it waits for
    can still be queued behind it, and readers and checkpoints are not held up."""
    queue = AppendQueue(gather_s=30.0)
    queue._last_group = 2
    lock = threading.RLock()
    written: list[int] = []
    first = queue.put(_one(1))
    lock_free_while_gathering: list[bool] = []

    def second() -> None:
        time.sleep(0.05)
        got = lock.acquire(blocking=False)
        lock_free_while_gathering.append(got)
        if got:
            lock.release()
        queue.put(_one(2))

    helper = threading.Thread(target=second)
    helper.start()
    queue.wait_or_write(first, lock, _settling(written))
    helper.join(10)
    assert lock_free_while_gathering == [True] and written == [2]


def test_a_gathering_leader_is_woken_by_the_batch_it_waits_for_not_by_each_one() -> None:
    """Each wake of the leader is a thread switch: with eight senders it was woken seven times
    a group. The spy clock counts the leader's passes through its wait."""
    spy = _SpyClock()
    queue = AppendQueue(gather_s=30.0, clock=spy)
    queue._last_group = 4
    written: list[int] = []
    first = queue.put(_one(0))

    def others() -> None:
        for g in range(1, 4):
            time.sleep(0.05)  # the leader is waiting by then
            queue.put(_one(g))

    helper = threading.Thread(target=others)
    helper.start()
    queue.wait_or_write(first, threading.RLock(), _settling(written))
    helper.join(10)
    assert written == [4]
    assert spy.calls <= 2  # the deadline, and one pass that waits until the fourth batch
