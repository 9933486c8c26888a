"""The recent daily level times the intraday shape (forecast.levelshape)."""

from __future__ import annotations

import numpy as np
import pytest

from forecast.baselines import SeasonalNaive
from forecast.choose import uses_week
from forecast.levelshape import RecentLevelShape
from forecast.select import SelectConfig, candidates
from forecast.types import FitError
from tests.forecast.synthetic import seasonal


def wape(pred: np.ndarray, actual: np.ndarray) -> float:
    return float(np.abs(pred - actual).sum() / np.abs(actual).sum())


def storm_series(seed: int, days: int = 13) -> np.ndarray:
    """Bursty hourly load whose first four days ran at three times the level (a storm)."""
    rng = np.random.default_rng(seed)
    y = seasonal(24 * days, level=1000, daily=0.8, noise=0.25, seed=seed)
    day_factor = np.exp(rng.normal(0.0, 0.25, days))
    day_factor[:4] *= 3.0
    return np.asarray(y * np.repeat(day_factor, 24), dtype=np.float64)


@pytest.mark.parametrize("seed", range(5))
def test_the_days_after_a_storm_week_are_forecast_at_their_own_level(seed: int) -> None:
    """Last week's copy brings the storm back; the level of the last days does not."""
    y = storm_series(seed)
    history, actual = y[:-72], y[-72:]
    pred = RecentLevelShape().fit(history).predict(72).mean
    copy = SeasonalNaive(168).fit(history).predict(72).mean
    assert 0.7 < pred.sum() / actual.sum() < 1.4
    assert wape(pred, actual) < 0.6 * wape(copy, actual)


def test_the_shape_is_pooled_over_the_days() -> None:
    """Each hour rests on a week of days: the forecast's hours are closer to the true shape
    than yesterday's copy is."""
    truth = seasonal(24 * 8, level=200, daily=0.6, noise=0.0, seed=1)[-24:]
    y = seasonal(24 * 8, level=200, daily=0.6, noise=0.3, seed=1)
    pred = RecentLevelShape().fit(y).predict(24).mean
    yesterday = SeasonalNaive(24).fit(y).predict(24).mean
    assert wape(pred, truth) < 0.5 * wape(yesterday, truth)
    assert pred.argmax() == truth.argmax() or abs(int(pred.argmax()) - int(truth.argmax())) <= 1


def test_a_burst_day_counts_as_a_factor_not_an_amount() -> None:
    """Yesterday at ten times the others lifts the level by 10 to the power of its weight
    (about 2.1 x at the default decay), where an amount-weighted mean would give about 4 x."""
    flat = np.full(24 * 7, 10.0)
    burst = flat.copy()
    burst[-24:] *= 10.0
    model = RecentLevelShape()
    weight = 1.0 / sum(0.7**age for age in range(7))
    lift = model.fit(burst).predict(24).mean.sum() / model.fit(flat).predict(24).mean.sum()
    assert lift == pytest.approx(10.0**weight)
    assert 2.0 < lift < 2.2


def test_idle_days_give_a_finite_level_and_all_idle_gives_zero() -> None:
    model = RecentLevelShape()
    assert (model.fit(np.zeros(24 * 5)).predict(48).mean == 0).all()
    y = seasonal(24 * 7, level=50, daily=0.4, noise=0.05, seed=2)
    y[-24:] = 0.0  # an idle day (the cleaning step drops outages before a model sees them)
    pred = model.fit(y).predict(24).mean
    # Floored at a hundredth of the median day: the level drops by at most 100 ** weight.
    assert np.isfinite(pred).all() and pred.sum() > 0
    assert pred.sum() > y[:24].sum() * 100.0 ** (-1.0 / sum(0.7**age for age in range(7))) * 0.9


def test_it_needs_two_days_is_blind_to_the_week_and_joins_the_candidates_then() -> None:
    with pytest.raises(FitError):
        RecentLevelShape().fit(np.ones(47))
    with pytest.raises(ValueError, match="decay"):
        RecentLevelShape(decay=0.0)
    assert not uses_week(RecentLevelShape(), 168)
    y = seasonal(24 * 3, level=100, daily=0.4, noise=0.05, seed=3)
    assert "levelshape24x7" in {c.name for c in candidates(y[:48], SelectConfig())}
    assert "levelshape24x7" not in {c.name for c in candidates(y[:47], SelectConfig())}
