"""Group commit: appends that arrive while another is committing share the next commit.

Each append puts its batch in an :class:`AppendQueue`. One appender at a time *leads*: it takes
the store's lock, takes *every* batch waiting by then and writes them together (one write-ahead
row, one transaction, one fsync). The others wait on the queue, not on the store's lock: when
the leader is done, those it wrote return at once, and one of those that came too late leads
the next group, which holds everything queued meanwhile.

Why not simply queue on the store's lock: every appender whose batch another had written still
had to take the lock, one after the other, to learn that it was done. Each of them waited for a
whole commit behind the lock, so the commits stayed small -- with eight senders on PostgreSQL
half the groups held one batch and 16,000 appends needed 7,364 commits.

A leader first waits, briefly, for as many batches as the last group held (:meth:`AppendQueue.gather`,
PostgreSQL's ``commit_delay``): those a group settled come back one by one, and without the wait
the first of them committed alone or with half of them.

Under a single appender nothing changes: its groups hold one batch, so it never waits. Results
are per batch: the samples of the group carry their batch's index through validation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from store.append_result import AppendResult
from store.types import Float64Array, Int64Array, SampleBatch

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore

Part = tuple[Int64Array, Int64Array, Float64Array]  # one batch's series ids, times and values


@dataclass(slots=True)
class Pending:
    """One append's batch until its group settles it with a result or an error."""

    batch: SampleBatch
    result: AppendResult | None = None
    error: Exception | None = None

    @property
    def settled(self) -> bool:
        return self.result is not None or self.error is not None

    def succeed(self, result: AppendResult) -> None:
        self.result = result

    def fail(self, error: Exception) -> None:
        if not self.settled:
            self.error = error

    def outcome(self) -> AppendResult:
        if self.error is not None:
            raise self.error
        if self.result is None:
            raise RuntimeError("an append left its group unsettled")
        return self.result


class AppendQueue:
    """``gather_s``: the longest a leader waits for the rest of a group (see :meth:`gather`)."""

    def __init__(self, gather_s: float = 0.001, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # a put wakes a gathering leader
        self._waiting: list[Pending] = []
        self._turn = threading.Condition()  # a leader's end wakes the appenders waiting here
        self._leading = False
        self.gather_s = gather_s
        self._clock = clock
        self._last_group = 0
        self._gather_target = 0  # the batches a gathering leader waits for; 0: none gathers

    def put(self, batch: SampleBatch) -> Pending:
        """Queue a batch. A gathering leader is woken only by the batch it waits for, not by
        each one before it: eight senders woke it seven times a group, each wake a thread
        switch and a turn at the interpreter lock."""
        pending = Pending(batch)
        with self._lock:
            self._waiting.append(pending)
            if 0 < self._gather_target <= len(self._waiting):
                self._arrived.notify()
        return pending

    def gather(self) -> None:
        """Commit delay, as PostgreSQL's ``commit_delay``: wait (at most ``gather_s``) until as
        many batches are queued as the last group held. Alone, the last group held one, so a
        single appender never waits.

        Why: the appenders a group settles return together, build their next batches and
        append again, while the next leader -- one that came during the commit -- already
        takes what is queued. Without the wait the groups halve: eight PostgreSQL senders
        committed 16,000 batches in 3,749 groups of four on average, each paying a commit."""
        target = self._last_group
        if target < 2:
            return
        deadline = self._clock() + self.gather_s
        with self._arrived:
            self._gather_target = target
            try:
                while len(self._waiting) < target:
                    left = deadline - self._clock()
                    if left <= 0:
                        return
                    self._arrived.wait(left)
            finally:
                self._gather_target = 0

    def take(self) -> list[Pending]:
        """Every batch waiting, oldest first (the leader, holding the store's lock)."""
        with self._lock:
            group, self._waiting = self._waiting, []
        return group

    def wait_or_write(self, pending: Pending, lock: AbstractContextManager[Any], write: Callable[[list[Pending]], None]) -> None:
        """Return once ``pending`` is settled: by another's group, or by leading one -- under
        ``lock``, ``write`` every batch waiting then.

        Called with ``lock`` already held (re-entrant), the caller writes at once without its
        turn: waiting would be for a leader who waits for this very lock. A leader blocked on
        the lock then finds its batch settled and writes what is left."""
        is_owned = getattr(lock, "_is_owned", None)  # threading.RLock's; a plain lock cannot re-enter
        reentrant = bool(is_owned and is_owned())
        if not reentrant and not self.lead(pending):
            return
        group: list[Pending] = []
        error: BaseException | None = None
        try:
            if not reentrant:
                self.gather()
            with lock:
                group = self.take()
                self._last_group = len(group)
                write(group)
        except BaseException as exc:
            error = exc
            raise
        finally:
            self.settle_rest(group, error)
            if not reentrant:
                self.end_turn()

    def lead(self, pending: Pending) -> bool:
        """Wait while another appender leads. True: ``pending`` is still unwritten and the caller
        now leads (it must call :meth:`end_turn`); False: another's group settled it."""
        with self._turn:
            while self._leading and not pending.settled:
                self._turn.wait()
            if pending.settled:
                return False
            self._leading = True
            return True

    @staticmethod
    def settle_rest(group: list[Pending], error: BaseException | None = None) -> None:
        """Nothing of a written (or failed, with ``error``) group stays unsettled."""
        left = error if isinstance(error, Exception) else RuntimeError("an append left its group unsettled")
        for pending in group:
            pending.fail(left)  # a no-op for those settled

    def end_turn(self) -> None:
        """The leader is done: the next appender may lead."""
        with self._turn:
            self._leading = False
            self._turn.notify_all()


def combined(parts: list[Part]) -> tuple[Int64Array, Int64Array, Float64Array, Int64Array]:
    """The parts as one batch, with each sample's part index (``owner``)."""
    if len(parts) == 1:
        sid, ts, val = parts[0]
        return sid, ts, val, np.zeros(len(sid), np.int64)
    owner = np.repeat(np.arange(len(parts), dtype=np.int64), [len(p[0]) for p in parts])
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]), owner)


def per_owner(status: np.ndarray, owner: Int64Array, owners: int, codes: int) -> np.ndarray:
    """Counts of each status code per owner: an (owners, codes) array."""
    return np.bincount(owner * codes + status.astype(np.int64), minlength=owners * codes).reshape(owners, codes)


def group_ids(store: TimeSeriesStore, group: list[Pending], cur: Any, now: int) -> tuple[list[Pending], list[Part]]:
    """Series ids of every sample of the group (the keys of all batches resolved in one
    call, so a series new to two batches is created once); a batch with bad ids fails alone."""
    live: list[Pending] = []
    ids: list[Int64Array | None] = []
    for pending in group:
        try:
            ids.append(checked_ids(store, pending.batch) if pending.batch.key_ids is not None else None)
            live.append(pending)
        except ValueError as exc:
            pending.fail(exc)
    unresolved = [p.batch.keys for p, i in zip(live, ids) if i is None]
    if unresolved:
        resolved = store.index.resolve([k for keys in unresolved for k in keys], store.backend, cur, now,
                                      store.active.room(now))
        at = 0
        for n, (p, i) in enumerate(zip(live, ids)):
            if i is None:
                ids[n] = resolved[at : at + len(p.batch.keys)]
                at += len(p.batch.keys)
    parts = [(key_ids[p.batch.key_index], np.asarray(p.batch.ts_ms, np.int64), np.asarray(p.batch.values, np.float64))
             for p, key_ids in zip(live, ids) if key_ids is not None]
    return live, parts


def checked_ids(store: TimeSeriesStore, batch: SampleBatch) -> Int64Array:
    ids = np.asarray(batch.key_ids, dtype=np.int64)
    if len(ids) != len(batch.keys):
        raise ValueError("key_ids must give one id per key")
    if len(ids) and (ids.min() < 0 or ids.max() > store.index.max_id()):  # 0: refused by the series limit
        raise ValueError("key_ids holds ids this store did not hand out")
    return ids
