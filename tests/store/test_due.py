"""The gate that lets an append skip the search for due series (store.due.DueGate): it may skip
only where the search would find nothing due, and it does skip while nothing can be."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from store import ManualClock, SampleBatch, SeriesKey, StoreOptions, TimeSeriesStore
from store.due import DueGate
from store.head import NEVER
from tests.conftest import T0, StoreFactory

MIN = 60_000
HOUR = 60 * MIN
OPTS = StoreOptions(chunk_range_ms=2 * HOUR, out_of_order_window_ms=5 * MIN, idle_flush_ms=30 * MIN,
                    checkpoint_grace_ms=10 * MIN)


def _key(name: str) -> SeriesKey:
    return SeriesKey.of("gpu_util", gpu=name, host="node-a")


def _due(store: TimeSeriesStore, cutoffs: Callable[[], np.ndarray]) -> int:
    """What the search finds due now (the store's own rule, recomputed)."""
    head = store.head
    pending = (head.last_ts != NEVER) & (head.last_ts >= head.flushed_until)
    return int(np.count_nonzero(pending & (cutoffs() > head.flushed_until)))


def _count_searches(store: TimeSeriesStore) -> tuple[list[int], Callable[..., np.ndarray]]:
    """Counts the store's searches for due series (its ``cutoffs`` calls) in ``[0]``; returns
    the counter and the store's own ``cutoffs``."""
    searches = [0]
    cutoffs = store.cutoffs

    def counted(force: bool = False, pressure: bool = False) -> np.ndarray:
        searches[0] += 1
        return cutoffs(force, pressure)

    store.cutoffs = counted  # type: ignore[method-assign]
    return searches, cutoffs


def test_bounds_follow_the_next_chunk_boundary_and_the_idle_time() -> None:
    gate = DueGate(chunk_range_ms=2 * HOUR, out_of_order_ms=5 * MIN, idle_flush_ms=30 * MIN)
    assert not gate.skip(T0, T0, False, T0)  # nothing learnt yet: always search
    last = np.array([T0 + 10 * MIN, NEVER, T0 + 70 * MIN], np.int64)
    flushed = np.array([T0, NEVER, T0 + 3 * MIN], np.int64)  # the third was flushed when it went idle
    gate.learn(last, flushed)
    assert gate.boundary_ms == T0 + 2 * HOUR + 5 * MIN  # both next boundaries are T0 + 2 h
    assert gate.idle_ms == T0 + 10 * MIN + 30 * MIN
    assert gate.skip(T0 + 2 * HOUR + 5 * MIN - 1, T0 + 11 * MIN, False, T0 + 40 * MIN - 1)
    assert not gate.skip(T0 + 2 * HOUR + 5 * MIN, T0 + 11 * MIN, False, T0)  # a boundary is reached
    assert not gate.skip(None, None, False, T0 + 40 * MIN)  # the first series may be idle
    assert not gate.skip(T0 + 12 * MIN, T0 + 12 * MIN, True, T0 + 12 * MIN)  # a series' first sample
    # A batch with older samples (a flushed series written again) brings the idle time forward.
    gate.learn(last, flushed)
    assert gate.skip(T0 + 20 * MIN, T0 + 1 * MIN, False, T0 + 20 * MIN)
    assert gate.idle_ms == T0 + 31 * MIN
    # A series with nothing flushed is due at once.
    gate.learn(np.array([T0], np.int64), np.array([NEVER], np.int64))
    assert not gate.skip(T0 + 1, T0 + 1, False, T0 + 1)


def test_an_append_never_skips_a_search_that_would_find_series_due(make_store: StoreFactory, clock: ManualClock) -> None:
    store = make_store(OPTS)
    steady, stops, late = _key("0"), _key("1"), _key("2")
    searches, cutoffs = _count_searches(store)
    for i in range(5 * 60):  # five hours, a scrape a minute
        ts = T0 + 3 * MIN + i * MIN
        clock.set(ts)
        # ``stops`` goes quiet (flushed when idle) and comes back; ``late`` is new at 2.5 h.
        keys = [steady] + ([stops] if i < 40 or i >= 200 else []) + ([late] if i >= 150 else [])
        store.append(SampleBatch.one_per_key(keys, ts, np.full(len(keys), float(i))))
        # The invariant: where series are due, the store knows (it searched) or has flushed them.
        assert _due(store, cutoffs) == 0 or store._due_since is not None, f"minute {i}: due series missed"
    assert store.stats["checkpoints"] >= 2  # the boundaries at 2 h and 4 h, the idle series at ~1 h
    assert store.head.flushed_until[store.index.get(stops)] > T0  # flushed as idle
    # 300 appends; the searches ran around the boundaries, the new series and the idle time only.
    assert searches[0] < 60, searches


def test_a_new_series_beside_pending_ones_is_marked_at_once_not_searched_for_a_grace(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    """A series a target adds is due at once (nothing of it is flushed) while the others are
    not: its mark is advanced right away (it holds nothing below its cutoff), so the appends
    after it skip the search again instead of searching until the grace ends."""
    store = make_store(OPTS)
    old, new = _key("0"), _key("1")
    searches, cutoffs = _count_searches(store)
    for i in range(40):  # ``new`` first comes at minute 20, well inside the 2 h range
        ts = T0 + 3 * MIN + i * MIN
        clock.set(ts)
        keys = [old] + ([new] if i >= 20 else [])
        store.append(SampleBatch.one_per_key(keys, ts, np.full(len(keys), float(i))))
        if i == 20:
            searches[0] = 0
    checkpoints = store.stats["checkpoints"]
    # the search at minute 20 found ``new`` due and marked it; none after (the grace is 10 min)
    assert searches[0] <= 1, searches
    assert _due(store, cutoffs) == 0
    sid = store.index.get(new)
    assert sid is not None
    assert store.head.flushed_until[sid] == T0  # the chunk boundary below its samples
    assert store.stats["checkpoints"] == checkpoints  # no checkpoint was needed for it
    _, vals = store.head.series(sid)
    assert vals.tolist() == [float(i) for i in range(20, 40)]  # every sample still read from the head
