"""Validation of a batch against the head, vectorised: which samples are accepted, which are
duplicates, which are rejected and why (the codes :class:`~store.tsdb.TimeSeriesStore` counts)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from store.append_result import RejectReason
from store.head import NEVER, Head
from store.options import StoreOptions
from store.series_index import REFUSED
from store.types import Float64Array, Int64Array

ACCEPT, DUPLICATE, TOO_OLD, CONFLICT, TOO_NEW, SERIES_LIMIT = 0, 1, 2, 3, 4, 5
REASONS = {TOO_OLD: RejectReason.TOO_OLD, CONFLICT: RejectReason.CONFLICT, TOO_NEW: RejectReason.TOO_NEW,
            SERIES_LIMIT: RejectReason.SERIES_LIMIT}


def validate(head: Head, options: StoreOptions, pending_floor: Int64Array | None, sid: Int64Array, ts: Int64Array,
             val: Float64Array, now_ms: int) -> npt.NDArray[np.int8]:
    """A status code per sample of a batch sorted by (series, time): accepted, a duplicate, or
    why it is rejected. ``pending_floor``: per series, the cutoff of a checkpoint being written
    (samples below it are too old)."""
    bits = val.view(np.uint64)
    status = np.zeros(len(sid), dtype=np.int8)
    # Repeats inside the batch (sorted, so they are neighbours).
    same = np.flatnonzero((sid[1:] == sid[:-1]) & (ts[1:] == ts[:-1])) + 1
    if len(same):  # compared with the first of their run, the one kept
        repeat = np.zeros(len(sid), bool)
        repeat[same] = True
        first = np.maximum.accumulate(np.where(repeat, 0, np.arange(len(sid))))
        status[same] = np.where(bits[same] == bits[first[same]], DUPLICATE, CONFLICT)
    status[ts > now_ms + options.max_future_ms] = TOO_NEW
    status[sid == REFUSED] = SERIES_LIMIT
    last = head.last_ts[sid]
    window = options.out_of_order_window_ms
    floor = np.where(last == NEVER, NEVER, last - window)
    floor = np.maximum(floor, head.flushed_until[sid])
    if pending_floor is not None:  # a background checkpoint is writing below these
        pending = pending_floor
        floor = np.maximum(floor, np.where(sid < len(pending), pending[np.minimum(sid, len(pending) - 1)], NEVER))
    open_ = status == ACCEPT
    status[open_ & (ts < floor)] = TOO_OLD
    at_last = (status == ACCEPT) & (ts == last)
    if at_last.any():
        status[at_last] = np.where(bits[at_last] == head.last_bits[sid[at_last]], DUPLICATE, CONFLICT)
    # Out of order but inside the window: rare, so checked one at a time against the head.
    late = np.flatnonzero((status == ACCEPT) & (ts < last))
    for i in late.tolist():
        existing = head.bits_at(int(sid[i]), int(ts[i]))
        if existing is not None:
            status[i] = DUPLICATE if existing == int(bits[i]) else CONFLICT
    return status


def sort_order(sid: Int64Array, ts: Int64Array) -> Int64Array | None:
    """The permutation into (series, time) order, None when already in it. A batch of several
    scrapes is a few runs that are each in series order (and in time order per series): a
    stable sort by series merges those runs in little more than one pass, where a two-key sort
    would start from scratch."""
    if len(sid) > 1 and not bool(np.all(sid[1:] > sid[:-1])):
        order = np.argsort(sid, kind="stable")
        s, t = sid[order], ts[order]
        if bool(np.any((s[1:] == s[:-1]) & (t[1:] < t[:-1]))):
            order = np.lexsort((ts, sid))
        return order
    return None
