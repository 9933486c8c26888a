"""The publish gate between rollup reads and checkpoints that commit off the store's lock."""

from __future__ import annotations

import threading
import time

import numpy as np

from store.publish_gate import PublishGate


def gate(marks: np.ndarray, max_wait_s: float = 5.0) -> PublishGate:
    return PublishGate(threading.RLock(), lambda sids: marks[sids], max_wait_s)


def test_a_read_is_settled_only_if_its_series_are_not_committing_and_their_marks_did_not_move() -> None:
    marks = np.array([10, 20, 30, 40], np.int64)
    g = gate(marks)
    sids = np.array([0, 2], np.int64)
    before = marks[sids].copy()
    assert g.settled(sids, before)
    g.begin(np.array([1, 3], np.int64))  # other series commit: no matter
    assert g.settled(sids, before)
    g.end()
    g.begin(np.array([2], np.int64))
    assert not g.settled(sids, before)  # rows of series 2 may or may not be visible yet
    marks[2] = 35
    g.end()
    assert not g.settled(sids, before)  # committed and marked: the snapshot is older than the rows
    assert g.settled(sids, marks[sids].copy())


def test_a_held_read_waits_for_the_commit_in_flight_and_holds_the_next_one_back() -> None:
    g = gate(np.zeros(4, np.int64))
    g.begin(np.array([1], np.int64))
    order: list[str] = []

    def reader() -> None:
        with g.hold():
            order.append("read")
            time.sleep(0.2)
            order.append("read done")

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.1)
    assert order == []  # waiting for the commit in flight
    order.append("commit done")
    g.end()
    time.sleep(0.05)
    g.begin(np.array([2], np.int64))  # waits for the held read
    order.append("next commit")
    t.join(5)
    g.end()
    assert order == ["commit done", "read", "read done", "next commit"]


def test_the_waits_are_bounded() -> None:
    g = gate(np.zeros(2, np.int64), max_wait_s=0.2)
    with g.hold():
        began = time.monotonic()
        g.begin(np.array([0], np.int64))  # a read that never ends cannot stop checkpoints
        assert 0.15 < time.monotonic() - began < 2
    began = time.monotonic()
    with g.hold():  # nor can a commit that never ends stop reads
        assert 0.15 < time.monotonic() - began < 2
    g.end()
