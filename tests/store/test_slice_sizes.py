"""Slices of a checkpoint sized by time (store.slice_sizes): the rule, and a background checkpoint
on SQLite that follows it (each slice its own transaction)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import ManualClock, StoreOptions, TimeSeriesStore
from store import background as background_module
from store.engine import create_store_engine
from store.head_blocks import series_slices, slice_end
from store.slice_sizes import FixedSlices, TimedSlices
from tests.conftest import T0
from tests.store.background_support import HOUR, KEYS, MIN, every_sample, scrape, wait_for


class FakeTimer:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def slice_taking(sizes: TimedSlices, timer: FakeTimer, seconds_per_sample: float) -> int:
    """One slice of what the sizes ask for, written at the given speed; returns its size."""
    size = sizes.begin()
    timer.now += size * seconds_per_sample
    sizes.end(size)
    return size


def test_timed_slices_start_at_the_least_then_aim_at_the_target_time() -> None:
    timer = FakeTimer()
    sizes = TimedSlices(0.010, least=5_000, most=50_000, smoothing=0.5, timer=timer)
    assert slice_taking(sizes, timer, 1e-6) == 5_000  # nothing known yet
    assert slice_taking(sizes, timer, 1e-6) == 10_000  # a million a second: 10 ms is 10,000
    # Appends slow it to a quarter of the speed: the size moves half way to the new rate's.
    assert slice_taking(sizes, timer, 4e-6) == 10_000
    assert sizes.begin() == 6_250  # (1e6 + 2.5e5) / 2 samples a second x 10 ms


def test_timed_slices_stay_within_their_bounds() -> None:
    timer = FakeTimer()
    sizes = TimedSlices(0.010, least=5_000, most=50_000, timer=timer)
    slice_taking(sizes, timer, 1e-9)  # a billion a second: 10,000,000 in 10 ms
    assert sizes.begin() == 50_000
    sizes.end(50_000)  # took no time at all: counted as a microsecond, not a division by zero
    assert sizes.begin() == 50_000
    for _ in range(40):
        slice_taking(sizes, timer, 1e-3)  # a thousand a second: 10 in 10 ms
    assert sizes.begin() == 5_000


def test_a_slice_that_wrote_nothing_teaches_nothing() -> None:
    timer = FakeTimer()
    sizes = TimedSlices(0.010, least=100, most=1_000_000, timer=timer)
    sizes.begin()
    timer.now += 5.0
    sizes.end(0)
    assert sizes.begin() == 100  # still nothing known


def test_slice_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="0 < least <= most"):
        TimedSlices(0.01, least=10, most=5)
    with pytest.raises(ValueError, match="0 < least <= most"):
        TimedSlices(0.01, least=0, most=5)
    with pytest.raises(ValueError, match="target time must be positive"):
        TimedSlices(0.0, least=5, most=10)
    assert FixedSlices(7).begin() == 7


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 50), max_size=40), st.integers(1, 120))
def test_series_slices_cover_every_series_once_and_cut_none(sizes: list[int], budget: int) -> None:
    """Whole series, in order, each slice the least run of series reaching the budget (the
    last may fall short; a series larger than the budget is a slice of its own)."""
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    slices = series_slices(offs, budget)
    if not sizes:
        assert slices == []
        return
    assert [lo for lo, _ in slices] == [0, *(hi for _, hi in slices[:-1])]
    assert slices[-1][1] == len(sizes)
    for k, (lo, hi) in enumerate(slices):
        taken = int(offs[hi] - offs[lo])
        assert hi > lo
        assert taken - sizes[hi - 1] < budget  # without its last series it was short
        if k < len(slices) - 1:
            assert taken >= budget


@pytest.mark.parametrize(("target_s", "expected"), [(60.0, [120, 600, 600, 600, 480]), (1e-9, [120] * 20)],
                         ids=["slow-target", "instant-target"])
def test_a_background_checkpoint_on_sqlite_sizes_its_slices_by_time(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch, target_s: float, expected: list[int]) -> None:
    """The first slice is the least (one series of 120 samples here); then as many samples as
    the target time allows at the speed measured so far, in whole series, up to the most."""
    monkeypatch.setattr(background_module, "BACKGROUND_SLICE_SAMPLES", 120)
    monkeypatch.setattr(background_module, "BACKGROUND_SLICE_MOST", 600)
    monkeypatch.setattr(background_module, "SLICE_TARGET_S", target_s)
    store = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(T0),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    store.open()
    slices: list[int] = []
    real_after = background_module.SlicePublisher.after

    def counted_after(self: Any, sids: Any) -> None:
        slices.append(len(sids))
        real_after(self, sids)

    monkeypatch.setattr(background_module.SlicePublisher, "after", counted_after)
    try:
        start = T0 - T0 % (2 * HOUR)
        for i in range(126):  # one sample a minute: the first 2 h range (120 a series) comes due
            scrape(store, start + i * MIN, float(i))
        wait_for(lambda: store.stats["checkpoints"] >= 1)
        assert slices == expected
        assert sum(slices) == 120 * len(KEYS)
        assert every_sample(store)["3"] == ([start + i * MIN for i in range(126)], [float(i) for i in range(126)])
    finally:
        store.close()


def test_a_slice_takes_one_series_at_least_whatever_its_budget() -> None:
    offs = np.asarray([0, 3, 5, 9], np.int64)
    assert [slice_end(offs, lo, 0) for lo in range(3)] == [1, 2, 3]  # else a loop over slices never ends
    assert slice_end(offs, 0, 10**9) == 3
