"""Which series are due to be checkpointed (:func:`cutoffs`, :func:`due_after_marking`), and when an
append may skip looking (:class:`DueGate`).

After every append group the store looked for due series: a cutoff for every series
(:func:`cutoffs`) compared with what is flushed -- a handful of
passes over per-series arrays. With 100 k targets' series scraped every second that was about a
tenth of ``infermeter up``'s CPU, and it found nothing nearly every time: a series comes due once a
chunk range (two hours), or when it goes idle.

After a search that found nothing due, :class:`DueGate` keeps two lower bounds:

* ``boundary_ms`` -- the least sample timestamp at which any pending series (one with samples
  not yet flushed) can come due: its cutoff passes what is flushed (``F``) once its newest
  sample, less the out-of-order window, reaches the next multiple of the chunk range above ``F``;
* ``idle_ms`` -- the least clock time at which any pending series can go idle: its newest sample
  (which only grows) plus ``idle_flush_ms``. A batch that gives a flushed series new samples
  lowers it to the batch's oldest timestamp plus ``idle_flush_ms``.

An append skips the search while its newest timestamp is under the first, the clock under the
second, and every series of the batch was pending before it (``fresh`` otherwise: a series
without samples, or flushed whole when it went idle, was in neither bound -- and one with
nothing flushed is due at once). ``flushed_until`` only grows, so
bounds learnt before a checkpoint are low: they cost a search, never a missed one. Pressure
checks (memory) are not gated; the maintenance pass always searches.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from store.head import NEVER, Head
from store.options import MINUTE_MS, StoreOptions
from store.types import Int64Array


def cutoffs(
    head: Head, opts: StoreOptions, now_ms: int, force: bool, pressure: bool, stopped: npt.NDArray[np.bool_] | None
) -> Int64Array:
    """Per series, the timestamp below which head samples should be in chunks.

    Normally a multiple of the chunk range (so rollup buckets are never split); under memory
    ``pressure`` a minute boundary (the hour bucket then splits and is merged), and the series
    that ``stopped`` go whole, not after an hour."""
    last = head.last_ts
    has = last != NEVER
    cutoff = np.full(head.capacity, NEVER, np.int64)
    if force:
        cutoff[has] = last[has] + 1
        return cutoff
    rng = MINUTE_MS if pressure else opts.chunk_range_ms
    cutoff[has] = (last[has] - opts.out_of_order_window_ms) // rng * rng
    idle = has & (last < now_ms - opts.idle_flush_ms)
    if stopped is not None:
        idle |= stopped
    cutoff[idle] = last[idle] + 1
    return cutoff


def due_after_marking(head: Head, cutoff: Int64Array) -> tuple[int, int, int]:
    """(series due, series pending, series marked): pending ones hold samples not yet flushed;
    due ones have a cutoff past what is flushed (unused id slots hold NEVER in both arrays: they
    are neither). Counted after the flushed mark of every due series that holds no sample below
    its cutoff (``first_ts`` is a lower bound on its head samples) moved to that cutoff, as a
    checkpoint would, without one; those are the marked ones (they stay pending).

    Why: a new series is due at once (nothing of it is flushed), so every series a target added
    kept every append searching for due series until a checkpoint ran -- the store's grace (a
    minute) after the first came -- though there was nothing of them to write. Marks only grow
    and no sample moves, so a checkpoint in flight is unaffected."""
    pending = (head.last_ts != NEVER) & (head.last_ts >= head.flushed_until)
    due = pending & (cutoff > head.flushed_until)
    n_due, n_pending = int(np.count_nonzero(due)), int(np.count_nonzero(pending))
    if n_due == 0:
        return 0, n_pending, 0
    empty = np.flatnonzero(due & (head.first_ts >= cutoff))
    if len(empty):
        head.mark_flushed(empty, cutoff)
    return n_due - len(empty), n_pending, len(empty)


class DueGate:
    def __init__(self, chunk_range_ms: int, out_of_order_ms: int, idle_flush_ms: int) -> None:
        self.chunk_range_ms = chunk_range_ms
        self.out_of_order_ms = out_of_order_ms
        self.idle_flush_ms = idle_flush_ms
        self.boundary_ms = NEVER  # NEVER: nothing learnt, always search
        self.idle_ms = NEVER

    def forget(self) -> None:
        self.boundary_ms = self.idle_ms = NEVER

    def skip(self, newest_ms: int | None, oldest_ms: int | None, fresh: bool, now_ms: int) -> bool:
        """Whether the search after an append can be skipped: ``newest_ms`` / ``oldest_ms`` of the
        samples it added (None: none), ``fresh`` when one of its series was not pending before."""
        if oldest_ms is not None:
            self.idle_ms = min(self.idle_ms, oldest_ms + self.idle_flush_ms)
        if fresh:
            return False
        if newest_ms is not None and newest_ms >= self.boundary_ms:
            return False
        return now_ms < self.idle_ms

    def learn(self, last_ts: Int64Array, flushed_until: Int64Array) -> None:
        """Bounds from the per-series arrays, after a search that found nothing due."""
        pending = (last_ts != NEVER) & (last_ts >= flushed_until)
        if not pending.any():
            self.boundary_ms = self.idle_ms = np.iinfo(np.int64).max
            return
        flushed = flushed_until[pending]
        rng = self.chunk_range_ms
        # The next chunk boundary above what is flushed (NEVER: due at once, the bound says so).
        nxt = np.where(flushed == NEVER, NEVER, (flushed // rng + 1) * rng + self.out_of_order_ms)
        self.boundary_ms = int(nxt.min())
        self.idle_ms = int(last_ts[pending].min()) + self.idle_flush_ms
