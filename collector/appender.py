"""Group commit for the scrape loops: many scrapes, one store append, each acknowledged after it.

Why: a store append has a fixed cost besides its samples -- a transaction and its commit, one
write-ahead row, the head's due-for-checkpoint scan over every series, a dozen numpy calls --
and a hop to a thread and back. At a hundred scrapes a second that fixed cost was most of the
store's share of a scrape. :class:`BatchingAppender` hands every scrape's batch to one writer
thread, which waits ``linger_s`` after the first batch for more to arrive (or until
``max_samples`` are waiting), then stores them all with a single ``append``. Every caller
awaits its own batch: the await returns only once the append holding it has committed, so
nothing is acknowledged before it is durable.

Series ids: a batch without ``key_ids`` gets them from the appender's ``resolve`` (which
creates new series) and keeps them (``batch.key_ids`` is set), so a scrape loop can pass them
along with its next batch of the same series and the store skips a dictionary lookup per
sample, as Prometheus's series references do.

Failures stay local: if the combined append fails, each batch is retried alone, so a batch
the store refuses fails only its own caller.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from store.types import Int64Array, SampleBatch, SeriesKey

log = logging.getLogger(__name__)


class _Appender(Protocol):
    def append(self, batch: SampleBatch) -> Any: ...


class BatchingAppender:
    """An awaitable ``append(batch)`` in front of a blocking appender (see the module doc)."""

    def __init__(self, appender: _Appender, *, linger_s: float = 0.05, max_samples: int = 1_000_000,
                 idle_exit_s: float = 5.0) -> None:
        self.appender = appender
        self.linger_s = linger_s
        self.max_samples = max_samples
        self.idle_exit_s = idle_exit_s
        self._resolve = getattr(appender, "resolve", None)
        self._cond = threading.Condition()
        self._pending: list[tuple[SampleBatch, asyncio.Future[Any], asyncio.AbstractEventLoop]] = []
        self._pending_samples = 0
        self._thread: threading.Thread | None = None
        self.appends = 0  # store appends made (each holding one or more batches)
        self.batches = 0

    async def __call__(self, batch: SampleBatch) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._cond:
            self._pending.append((batch, future, loop))
            self._pending_samples += len(batch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="scrape-appender", daemon=True)
                self._thread.start()
            elif len(self._pending) == 1 or self._pending_samples >= self.max_samples:
                self._cond.notify()
        return await future

    # -- the writer thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                idle_until = time.monotonic() + self.idle_exit_s
                while not self._pending:
                    left = idle_until - time.monotonic()
                    if left <= 0:
                        self._thread = None  # a later call starts a new writer
                        return
                    self._cond.wait(left)
                flush_at = time.monotonic() + self.linger_s
                while self._pending_samples < self.max_samples and (left := flush_at - time.monotonic()) > 0:
                    self._cond.wait(left)
                group, self._pending, self._pending_samples = self._pending, [], 0
            self._store(group)

    def _store(self, group: list[tuple[SampleBatch, asyncio.Future[Any], asyncio.AbstractEventLoop]]) -> None:
        try:
            result = self._append([batch for batch, _, _ in group])
        except Exception as exc:
            if len(group) == 1:
                _settle(group[0][1], group[0][2], None, exc)
                return
            for item in group:  # find the batch that fails: the others still get stored
                self._store([item])
            return
        for _, future, loop in group:
            _settle(future, loop, result, None)

    def _append(self, batches: list[SampleBatch]) -> Any:
        for batch in batches:
            if batch.key_ids is None and self._resolve is not None and len(batch):
                batch.key_ids = np.asarray(self._resolve(batch.keys), np.int64)
        self.appends += 1
        self.batches += len(batches)
        if len(batches) == 1:
            return self.appender.append(batches[0])
        return self.appender.append(combine(batches))


def _settle(future: asyncio.Future[Any], loop: asyncio.AbstractEventLoop, result: Any, exc: BaseException | None) -> None:
    def settle() -> None:
        if future.done():  # the caller was cancelled meanwhile
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the caller's event loop is closed: nobody is waiting any more
        pass


def combine(batches: Sequence[SampleBatch]) -> SampleBatch:
    """One batch holding every sample of ``batches``; ordered by their first series id when
    they all carry ids, so that batches of series created together stay in id order (the
    store then has little or nothing to sort)."""
    if all(b.key_ids is not None for b in batches):
        batches = sorted(batches, key=_first_id)
    keys: list[SeriesKey] = []
    index_parts: list[Int64Array] = []
    for b in batches:
        index_parts.append(np.asarray(b.key_index, np.int64) + len(keys))
        keys.extend(b.keys)
    ids: Int64Array | None = None
    if all(b.key_ids is not None for b in batches):
        ids = np.concatenate([np.asarray(b.key_ids, np.int64) for b in batches])
    return SampleBatch(
        keys,
        np.concatenate(index_parts),
        np.concatenate([np.asarray(b.ts_ms, np.int64) for b in batches]),
        np.concatenate([np.asarray(b.values, np.float64) for b in batches]),
        ids,
    )


def _first_id(batch: SampleBatch) -> int:
    ids = batch.key_ids
    if ids is None or not len(ids):
        return 0
    return int(ids[int(batch.key_index[0])]) if len(batch.key_index) else 0
