"""Hour-of-day x weekday effects at the recent level (forecast.twoway)."""

from __future__ import annotations

import numpy as np
import pytest

from forecast.baselines import SeasonalNaive
from forecast.choose import uses_week
from forecast.select import SelectConfig, candidates
from forecast.twoway import HourWeekdayEffects, interaction_weight
from forecast.types import FitError
from tests.forecast.synthetic import seasonal


def wape(pred: np.ndarray, actual: np.ndarray) -> float:
    return float(np.abs(pred - actual).sum() / np.abs(actual).sum())


def test_hour_and_weekday_shapes_are_recovered_from_one_noisy_week() -> None:
    """Each hour of the week seen once: seasonal naive 168 copies its noise, the two effects
    rest on 7 and 24 points each and forecast the shape itself."""
    clean = seasonal(24 * 10, level=500, daily=0.6, weekly=0.5, noise=0.0, seed=1)
    noisy = seasonal(24 * 10, level=500, daily=0.6, weekly=0.5, noise=0.3, seed=1)
    history, actual = noisy[: 24 * 7], clean[24 * 7 :]
    effects = HourWeekdayEffects().fit(history).predict(72).mean
    copy = SeasonalNaive(168).fit(history).predict(72).mean
    assert wape(effects, actual) < 0.6 * wape(copy, actual)
    assert wape(effects, actual) < 0.12


def test_the_weekend_is_forecast_lower_than_the_weekdays() -> None:
    y = seasonal(24 * 14 + 72, level=500, daily=0.3, weekly=0.5, noise=0.05, seed=2)
    # 14 days from a Monday: the three days ahead are Monday to Wednesday. Cut at Friday's end
    # instead, and the days ahead are Saturday, Sunday, Monday.
    history = y[: 24 * 12]
    pred = HourWeekdayEffects().fit(history).predict(72).mean
    saturday, sunday, monday = pred.reshape(3, 24).mean(axis=1)
    assert saturday < 0.65 * monday and sunday < 0.65 * monday


def test_a_burst_and_an_outage_hour_move_no_effect_much() -> None:
    base = seasonal(24 * 14, level=500, daily=0.4, weekly=0.3, noise=0.02, seed=3)
    y = base.copy()
    y[24 * 9 + 14] = 50_000.0  # a burst at 14:00 of one Wednesday
    y[24 * 11 + 3 : 24 * 11 + 6] = 1.0  # three hours nearly idle
    calm = HourWeekdayEffects().fit(base).predict(72).mean
    hit = HourWeekdayEffects().fit(y).predict(72).mean
    assert np.abs(hit / calm - 1).max() < 0.05


def test_a_level_shift_three_days_ago_moves_the_level() -> None:
    """The recent residuals set the level. Part of a shift this recent is taken for the
    weekdays it fell on (their effects are medians of two weeks), so the forecast lands between
    the levels; last week's copy stays at the old one (last week plus the gap carries it all)."""
    y = seasonal(24 * 14 + 72, level=1000, daily=0.4, weekly=0.3, noise=0.02, seed=4)
    y[24 * 11 :] *= 1.8  # a tenant moved in three days before the forecast
    history, actual = y[: 24 * 14], y[24 * 14 :]
    pred = HourWeekdayEffects().fit(history).predict(72).mean
    copy = SeasonalNaive(168).fit(history).predict(72).mean
    assert pred.sum() / actual.sum() > copy.sum() / actual.sum() + 0.1
    assert 0.65 < pred.sum() / actual.sum() < 1.05


def test_a_job_every_week_is_carried_a_one_off_burst_is_not() -> None:
    """An hour of the week the two effects cannot express (a batch job every Tuesday at 02:00),
    seen in two weeks, comes back a week later; a burst seen once is not copied."""
    calm = seasonal(24 * 15, level=500, daily=0.3, weekly=0.0, noise=0.05, seed=5)
    y = calm.copy()
    y[[24 * 1 + 2, 24 * 8 + 2]] += 3000.0  # Tuesdays, 02:00
    y[24 * 10 + 15] += 3000.0  # Thursday 15:00, once
    # 15 days from a Monday: the two days ahead are a Tuesday and a Wednesday, then Thursday.
    ratio = HourWeekdayEffects().fit(y).predict(72).mean / HourWeekdayEffects().fit(calm).predict(72).mean
    assert ratio[2] > 1.3  # carried, shrunk by how little the rest of the week repeats
    assert abs(ratio[48 + 15] - 1) < 0.02
    assert np.abs(np.delete(ratio, 2) - 1).max() < 0.05
    one_week = HourWeekdayEffects().fit(y[: 24 * 8]).predict(24).mean  # one Tuesday seen
    assert one_week[2] < 2 * np.median(one_week)


def test_the_interaction_weight_is_the_week_apart_correlation_clipped() -> None:
    rng = np.random.default_rng(6)
    week = rng.normal(size=168)
    assert interaction_weight(np.concatenate([week, week]), 168, 24) == pytest.approx(1.0)
    assert interaction_weight(np.concatenate([week, -week]), 168, 24) == 0.0
    assert interaction_weight(rng.normal(size=168 + 10), 168, 24) == 0.0  # under a day of pairs
    assert interaction_weight(np.zeros(400), 168, 24) == 0.0


def test_idle_hours_and_zeros_stay_finite_and_not_negative() -> None:
    rng = np.random.default_rng(7)
    y = np.where(rng.random(24 * 9) < 0.4, 0.0, rng.gamma(0.5, 2000.0, 24 * 9))
    pred = HourWeekdayEffects().fit(y).predict(72)
    assert np.isfinite(pred.mean).all() and (pred.mean >= 0).all()
    assert pred.mean.max() <= y.max()


def test_it_needs_a_week_sees_the_week_and_joins_the_candidates_then() -> None:
    with pytest.raises(FitError):
        HourWeekdayEffects().fit(np.ones(167))
    assert uses_week(HourWeekdayEffects(), 168)
    y = seasonal(24 * 9, level=100, daily=0.4, weekly=0.3, noise=0.05, seed=8)
    names = {c.name for c in candidates(y, SelectConfig())}
    assert "effects24x7[log]" in names
    assert "effects24x7[log]" not in {c.name for c in candidates(y[:160], SelectConfig())}
    daily = SelectConfig(season=7, long_season=None, step=1)
    assert not any(c.name.startswith("effects") for c in candidates(y[:60], daily))
