"""Group commit: appends that arrive while another is committing share the next commit.

Each append puts its batch in an :class:`AppendQueue` and then takes the store's lock. The
first to get it takes *every* batch waiting and writes them together (one write-ahead row,
one transaction, one fsync); the others find theirs settled when they get the lock and
return at once. Under a single appender nothing changes; under many (scrape workers, remote
write senders) the commit cost is paid once per group instead of once per batch. Results are
per batch: the samples of the group carry their batch's index through validation.
"""

from __future__ import annotations

import threading
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
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[Pending] = []

    def put(self, batch: SampleBatch) -> Pending:
        pending = Pending(batch)
        with self._lock:
            self._waiting.append(pending)
        return pending

    def take(self) -> list[Pending]:
        """Every batch waiting, oldest first (the caller holds the store's lock)."""
        with self._lock:
            group, self._waiting = self._waiting, []
        return group


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
