"""Seals and size-class merges taken off the lock (a background thread's work): asked for
instead of run inline, merged apart, put in place only over exactly what they merged."""

from __future__ import annotations

import numpy as np
import pytest

import store.head as head_module
import store.head_blocks as head_blocks
from store.head import Head


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(head_module, "_SEAL_PENDING", 30)
    monkeypatch.setattr(head_module, "_OFFLOAD_PENDING", 90)
    monkeypatch.setattr(head_blocks, "_BASE", 4)  # size classes from a few samples on


def _add(head: Head, t: int, sids: range = range(1, 11)) -> None:
    sid = np.asarray(list(sids), np.int64)
    head.add(sid, np.full(len(sid), t, np.int64), sid.astype(np.float64) + t)


def _all(head: Head) -> list[tuple[int, int, float]]:
    sid, ts, val = head.columns()
    return list(zip(sid.tolist(), ts.tolist(), val.tolist()))


def _expected(times: range, sids: range = range(1, 11)) -> list[tuple[int, int, float]]:
    return [(s, t, float(s + t)) for s in sids for t in times]


def test_a_due_seal_is_asked_for_not_run_and_adopted_once_merged(small: None) -> None:
    head, asked = Head(), []
    head.offload = lambda: asked.append(1)
    for t in range(3):
        _add(head, t)
    assert asked == [1] and head.frozen().blocks == ()  # due, asked for, nothing merged inline
    work = head.seal_work()
    assert work is not None and len(work.pending) == 3
    _add(head, 3)  # arrives while the merge runs
    assert head.adopt(work, work.merge())
    assert len(head.frozen().blocks) == 1 and len(head.frozen().pending) == 1
    assert _all(head) == _expected(range(4))


def test_a_read_that_sealed_meanwhile_makes_the_merge_a_no_op(small: None) -> None:
    head = Head()
    head.offload = lambda: None
    for t in range(3):
        _add(head, t)
    work = head.seal_work()
    assert work is not None
    head.window(np.asarray([1], np.int64), 0, 10)  # a read seals inline
    before = head.frozen()
    assert not head.adopt(work, work.merge())
    assert head.frozen().blocks == before.blocks and _all(head) == _expected(range(3))


def test_size_class_merges_are_asked_for_and_replace_their_blocks_in_place(small: None) -> None:
    head, asked = Head(), []
    head.offload = lambda: asked.append(1)
    t = 0
    while len(head.frozen().blocks) < head_blocks._FANIN:  # one block per seal: none merged inline
        _add(head, t)
        t += 1
        head.seal()
    work = head.seal_work()
    assert work is not None and len(work.blocks) == head_blocks._FANIN and asked
    _add(head, t)
    head.seal()  # a block sealed behind the run being merged
    assert head.adopt(work, work.merge())
    assert len(head.frozen().blocks) == 2
    assert _all(head) == _expected(range(t + 1))


def test_past_the_bound_pending_is_sealed_inline_when_the_merging_thread_lags(small: None) -> None:
    head, asked = Head(), []
    head.offload = lambda: asked.append(1)
    for t in range(9):  # 90 samples: the bound
        _add(head, t)
    assert len(head.frozen().blocks) == 1 and head.frozen().pending == ()
    assert _all(head) == _expected(range(9))
