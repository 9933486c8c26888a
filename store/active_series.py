"""Which series are active (written, or created, within ``idle_flush_ms``), for the store's
``max_series`` limit: a new series beyond it is refused, not created; and which have stopped,
for the head's memory bound."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from store.head import NEVER, Head
from store.types import Int64Array


class ActiveSeries:
    def __init__(self, head: Head, limit: int, idle_ms: int) -> None:
        self.head = head
        self.limit = limit
        self.idle_ms = idle_ms
        self._born_ms: Int64Array = np.full(0, NEVER, np.int64)  # per id: when this process created it

    def room(self, now_ms: int) -> Callable[[], int | None] | None:
        """How many series may still be created (asked only when a batch brings new ones)."""
        if not self.limit:
            return None
        return lambda: self.limit - self.count(now_ms)

    def born(self, created: list[int], now_ms: int) -> None:
        if not created:
            return
        top = max(created)
        if top >= len(self._born_ms):
            grown = np.full(max(top + 1, 2 * len(self._born_ms), 1024), NEVER, np.int64)
            grown[: len(self._born_ms)] = self._born_ms
            self._born_ms = grown
        self._born_ms[np.asarray(created, np.int64)] = now_ms

    def count(self, now_ms: int) -> int:
        since = now_ms - self.idle_ms
        written = self.head.last_ts >= since
        born = np.zeros(len(written), bool)
        n = min(len(written), len(self._born_ms))
        born[:n] = self._born_ms[:n] >= since
        if len(written):
            written[0] = born[0] = False  # id 0 is no series
        return int(np.count_nonzero(written | born))


def stopped(head: Head, now_ms: int, quiet_ms: int) -> npt.NDArray[np.bool_]:
    """Series that received nothing for ``quiet_ms``: under memory pressure they are flushed
    whole and keep nothing in memory, so the head is bounded by the series still arriving, not by
    every series seen in the last hour."""
    last = head.last_ts
    quiet: npt.NDArray[np.bool_] = (last != NEVER) & (last < now_ms - quiet_ms)
    return quiet
