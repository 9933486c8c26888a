"""The head's memory bound: over ``max_head_samples`` checkpoints run early (rollups stay
exact), and series that stopped arriving are flushed whole instead of waiting for the idle flush."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import store.checkpoint as checkpoint_module
from store import Matcher, RangeQuery, Reader, SampleBatch, Selector, SeriesKey, StoreOptions
from store.head import EMPTY
from store.head_frozen import Frozen
from store.head_packed import PackedBlock
from store.types import STALE_NAN_BITS
from tests.conftest import T0, StoreFactory
from tests.store.background_support import wait_for
from tests.store.test_store import HOUR, MIN, _aggregate


def test_memory_pressure_flushes_early_and_keeps_rollups_exact(make_store: StoreFactory) -> None:
    # 10 series at 15 s: 3,000 samples is 75 minutes, well inside one 2 h chunk range.
    store = make_store(StoreOptions(max_head_samples=3_000, checkpoint_grace_ms=0))
    keys = [SeriesKey.of("tokens_total", gpu=str(g)) for g in range(10)]
    rng = np.random.default_rng(11)
    steps = np.cumsum(rng.integers(0, 40, size=(10, 600)), axis=1).astype(float)
    peak = 0
    for i in range(600):  # 2 h 30 min
        ts = T0 + i * 15_000
        store.clock.set(ts)  # type: ignore[attr-defined]
        store.append(SampleBatch.one_per_key(keys, ts, steps[:, i]))
        peak = max(peak, store.head.samples)
    assert store.stats["checkpoints"] >= 2
    assert peak <= 3_000 + len(keys)  # bounded by the budget (plus the batch that crossed it)
    reader = Reader(store)
    end = T0 + 600 * 15_000 - 1
    raw = reader.raw(Selector("tokens_total", (Matcher("gpu", "=", "4"),)), T0, end)[0]
    assert raw.values.tolist() == steps[4].tolist()
    for step in (MIN, HOUR):
        for fn in ("increase", "count", "max"):
            result = reader.range(RangeQuery(Selector("tokens_total", (Matcher("gpu", "=", "4"),)), T0, end, step, fn))  # type: ignore[arg-type]
            assert result[0].source.startswith("rollup")
            expected = _aggregate(raw.ts_ms, raw.values, T0, end, step, fn)
            np.testing.assert_allclose(result[0].values, expected, err_msg=f"{fn} {step}")


def test_memory_pressure_flushes_stopped_series_whole(make_store: StoreFactory) -> None:
    """Series that stopped arriving do not hold the head above its bound until the idle flush
    (an hour): once quiet for the out-of-order window they are flushed whole and keep nothing in
    memory; their data stays readable."""
    store = make_store(StoreOptions(max_head_samples=20_000, checkpoint_grace_ms=0))
    gone = [SeriesKey.of("old_metric", i=str(i)) for i in range(2_000)]
    alive = [SeriesKey.of("live_metric", i=str(i)) for i in range(10)]
    for step in range(12):  # 24,000 samples in 12 s: over the bound, all inside the out-of-order window
        ts = T0 + step * 1_000
        store.clock.set(ts)  # type: ignore[attr-defined]
        store.append(SampleBatch.one_per_key(gone, ts, np.full(len(gone), float(step))))
    assert store.head.samples >= 20_000  # nothing could be flushed yet
    held = []
    for step in range(1, 60):  # then only ten series arrive, every 10 s, for ten minutes
        ts = T0 + 11_000 + step * 10_000
        store.clock.set(ts)  # type: ignore[attr-defined]
        store.append(SampleBatch.one_per_key(alive, ts, np.full(len(alive), float(step))))
        held.append(store.head.samples)
    quiet_at = 31  # 5 min (the out-of-order window) after the old series stopped, plus the 5 s check
    assert min(held[: quiet_at - 2]) >= 20_000  # still inside their window: kept for late samples
    assert max(held[quiet_at:]) < 1_000, held  # then flushed whole: the head holds the live series only
    ids = np.asarray([store.index.get(k) for k in gone], np.int64)
    assert not (store.head.first_ts[ids] != EMPTY).any()
    values = Reader(store).raw(Selector("old_metric", (Matcher("i", "=", "7"),)), T0, T0 + HOUR)[0].values
    assert values.tolist() == [float(s) for s in range(12)]


@pytest.mark.parametrize("background", [True, False], ids=["background", "inline"])
def test_a_head_whose_out_of_order_window_outgrows_the_budget_stays_near_that_window(
    make_store: StoreFactory, background: bool
) -> None:
    """With more samples inside the out-of-order window than ``max_head_samples`` (100 k series
    at 1 s against 10 M), no checkpoint can bring the head under the budget. Each early
    checkpoint still flushes what fell out of the window; the next one must come when the head
    grew a quarter past what that one left, not a quarter past the size that set it off (a
    background checkpoint had not trimmed yet then), or the trigger climbs by a quarter a
    checkpoint and the head with it, for the whole chunk range."""
    store = make_store(StoreOptions(max_head_samples=2_000, checkpoint_grace_ms=0, background_checkpoints=background))
    keys = [SeriesKey.of("gpu_util", gpu=str(g)) for g in range(50)]
    window = 5 * MIN // 2_000 * len(keys)  # samples inside the out-of-order window: 7,500
    held = []
    for i in range(80 * 30):  # 80 minutes, a scrape every 2 s
        ts = T0 + i * 2_000
        store.clock.set(ts)  # type: ignore[attr-defined]
        store.append(SampleBatch.one_per_key(keys, ts, np.full(len(keys), float(i % 97))))
        if store.background is not None:  # let a checkpoint it asked for finish, as a scrape interval would
            wait_for(lambda: not store.background._checkpoint_wanted and not store.checkpoint_lock.locked())  # type: ignore[union-attr]
        held.append(store.head.samples)
    late = held[40 * 30:]  # the second 40 minutes: long past the first checkpoints
    assert max(late) <= 2 * window, (max(late), window)
    assert store.stats["checkpoints"] >= 10
    raw = Reader(store).raw(Selector("gpu_util", (Matcher("gpu", "=", "7"),)), T0, T0 + 80 * MIN)[0]
    assert raw.values.tolist() == [float(i % 97) for i in range(80 * 30)]  # everything flushed is read back


def test_a_large_checkpoint_holds_what_it_writes_packed_and_writes_every_value_exactly(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An early checkpoint of 100 k series at 1 s flushes ~13 M samples: merged whole, as plain
    columns (24 bytes a sample), they were a third of the service's memory. They are merged and
    written a range of series at a time, and what the head keeps is packed; integers, decimals,
    arbitrary floats, NaN and staleness markers all come back bit for bit."""
    held: list[type] = []
    ranges: list[int] = []
    real_write = checkpoint_module.write_checkpoint
    real_ranges = Frozen.merged_slices

    def spying_write(store: object, cur: object, plan: checkpoint_module.Plan, *args: object, **kw: object) -> None:
        real_write(store, cur, plan, *args, **kw)  # type: ignore[arg-type]
        assert plan.trimmed is not None
        held.append(type(plan.trimmed[0]))

    def spying_ranges(self: Frozen, upto: int, budget: int) -> Iterator[Any]:
        for block in real_ranges(self, upto, budget):
            ranges.append(len(block))
            yield block

    monkeypatch.setattr(Frozen, "merged_slices", spying_ranges)
    monkeypatch.setattr(checkpoint_module, "MERGE_SAMPLES", 50_000)
    monkeypatch.setattr(checkpoint_module, "write_checkpoint", spying_write)
    store = make_store(StoreOptions())
    n_series, scrapes = 1_500, 200  # 300 k samples: above PACK_MIN_SAMPLES, 200 a series
    keys = [SeriesKey.of("mixed", s=str(s)) for s in range(n_series)]
    rng = np.random.default_rng(5)
    kinds = np.arange(n_series) % 5
    values = np.empty((n_series, scrapes))
    values[kinds == 0] = np.cumsum(rng.integers(0, 9, size=((kinds == 0).sum(), scrapes)), axis=1)  # counters
    values[kinds == 1] = rng.integers(0, 400, size=((kinds == 1).sum(), scrapes)) / 4  # quarter steps
    values[kinds == 2] = rng.normal(60, 9, size=((kinds == 2).sum(), scrapes))  # arbitrary floats
    values[kinds == 3] = 7.0
    values[kinds == 4] = rng.integers(0, 3, size=((kinds == 4).sum(), scrapes))
    values[kinds == 4, ::7] = np.nan
    values[kinds == 4, 3::11] = np.frombuffer(STALE_NAN_BITS.to_bytes(8, "little"), np.float64)[0]
    for i in range(scrapes):
        ts = T0 + i * 1_000 + int(rng.integers(0, 4))
        store.clock.set(ts)  # type: ignore[attr-defined]
        store.append(SampleBatch.one_per_key(keys, ts, values[:, i]))
    assert store.checkpoint(force=True) == n_series * scrapes
    assert held == [PackedBlock]
    assert sum(ranges) == n_series * scrapes and len(ranges) == 6 and max(ranges) <= 50_000 + scrapes
    store.close(flush=False)
    again = make_store(StoreOptions())  # nothing left to replay: every sample is read from the chunks
    assert again.head.samples == 0
    reader = Reader(again)
    for s in (0, 1, 2, 3, 4, 777, 1_499):
        raw = reader.raw(Selector("mixed", (Matcher("s", "=", str(s)),)), T0, T0 + scrapes * 1_000)[0]
        np.testing.assert_array_equal(raw.values.view(np.int64), values[s].view(np.int64), err_msg=f"series {s}")
