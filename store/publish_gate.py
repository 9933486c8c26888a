"""Rollup reads that stay consistent with checkpoints committing off the store's lock.

A read of rollups takes the head's flushed marks (under the store's lock), then reads rollup
rows from SQL (off it) and adds the head's samples at or past each mark. A checkpoint commits
rows and then moves the marks of its series. If that commit lands between the read's snapshot
and its SQL read, the read sees the new rows *and* takes the same samples from the head: they
count twice. Inline checkpoints commit and move the marks in one hold of the store's lock; a
background checkpoint commits off it (PostgreSQL: its commit waits for an fsync; SQLite: an
append holds the store's lock while it waits for SQLite's write lock, which the checkpoint's
connection holds until it commits).

The gate makes such a read detectable and, on a second try, impossible:

* a background checkpoint announces the series of each commit (:meth:`PublishGate.begin`)
  and clears them once their marks moved (:meth:`PublishGate.end`), both under the lock;
* a read is :meth:`settled` when none of its series is in a commit in flight and their marks
  are still those of its snapshot (marks only grow), checked under the lock after the read;
* a read that was not settled tries again while holding the gate (:meth:`PublishGate.hold`):
  it waits for the commit in flight to end, and a checkpoint waits for the held read before
  its next commit begins. Checkpoints are not latency-bound, reads are short, and the wait is
  bounded (``max_wait_s``) so that a stuck reader cannot stop checkpoints; a read that still
  overlapped one is simply tried again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from store.types import Int64Array

_EMPTY = np.empty(0, np.int64)


class PublishGate:
    def __init__(self, lock: threading.Lock | Any, marks: Callable[[Int64Array], Int64Array],
                 max_wait_s: float = 5.0) -> None:
        """``lock``: the store's (reentrant) lock; ``marks``: the flushed marks of some series,
        read under it."""
        self._changed = threading.Condition(lock)
        self._marks = marks
        self._in_flight: Int64Array = _EMPTY
        self._holds = 0
        self.max_wait_s = max_wait_s

    def begin(self, sids: Int64Array) -> None:
        """A commit of rollup rows for ``sids`` (sorted, unique) is about to start; waits while
        reads hold the gate (at most ``max_wait_s``)."""
        with self._changed:
            deadline = time.monotonic() + self.max_wait_s
            while self._holds and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            self._in_flight = sids

    def end(self) -> None:
        """The commit is done (or failed) and its series' marks moved; call with the lock held
        in the same critical section that moved them."""
        with self._changed:
            self._in_flight = _EMPTY
            self._changed.notify_all()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """A read that no new commit may overlap: waits for the one in flight, if any."""
        with self._changed:
            self._holds += 1
            deadline = time.monotonic() + self.max_wait_s
            while len(self._in_flight) and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
        try:
            yield
        finally:
            with self._changed:
                self._holds -= 1
                self._changed.notify_all()

    def settled(self, sids: Int64Array, before: Int64Array) -> bool:
        """Whether a read of ``sids`` whose head snapshot had the flushed marks ``before`` goes
        with the rollup rows it read after: none of them in a commit now, and their marks
        unchanged (marks only grow, and every commit of rows moves them)."""
        with self._changed:
            if len(self._in_flight) and np.isin(sids, self._in_flight).any():
                return False
            return bool(np.array_equal(before, self._marks(sids)))
