"""Last week plus the smoothed gap to it, and the recent median: the two baselines for level
shifts and for bursty load."""

from __future__ import annotations

import numpy as np
import pytest

from forecast.baselines import RecentMedian, SeasonalNaive, SeasonalNaiveSES
from forecast.choose import uses_week
from forecast.types import FitError
from tests.forecast.synthetic import seasonal


def test_a_stable_week_is_copied_as_seasonal_naive_does() -> None:
    y = seasonal(24 * 14, level=1000, daily=0.5, weekly=0.6, noise=0.0, seed=1)
    ses = SeasonalNaiveSES(168, 24).fit(y).predict(72).mean
    np.testing.assert_allclose(ses, SeasonalNaive(168).fit(y).predict(72).mean, atol=1e-6)


def test_a_level_shift_four_days_ago_is_carried_forward() -> None:
    base = seasonal(24 * 14 + 72, level=1000, daily=0.5, weekly=0.6, noise=0.02, seed=2)
    y = base.copy()
    y[24 * 10 :] *= 1.8  # a tenant moved in four days before the forecast
    history, actual = y[: 24 * 14], y[24 * 14 :]
    copy = SeasonalNaive(168).fit(history).predict(72).mean
    gap = SeasonalNaiveSES(168, 24, log=True).fit(history).predict(72).mean
    assert abs(gap.sum() / actual.sum() - 1) < 0.1
    assert copy.sum() / actual.sum() < 0.75  # last week's copy stays at the old level


def test_idle_hours_do_not_blow_up_the_gap_on_the_log_scale() -> None:
    rng = np.random.default_rng(3)
    y = np.where(rng.random(24 * 10) < 0.3, 0.0, rng.gamma(0.5, 2000.0, 24 * 10))
    pred = SeasonalNaiveSES(168, 24, log=True).fit(y).predict(72).mean
    assert np.isfinite(pred).all() and pred.max() <= 3 * y.max()


def test_last_week_s_holiday_is_not_copied() -> None:
    y = seasonal(24 * 28, level=1000, daily=0.5, weekly=0.6, noise=0.02, seed=4)
    y[24 * 21 : 24 * 22] *= 0.3  # last Monday was a holiday
    monday = SeasonalNaiveSES(168, 24).fit(y).predict(24).mean
    earlier = np.median([y[24 * 7 * w : 24 * 7 * w + 24] for w in (0, 1, 2)], axis=0)
    assert np.abs(monday - earlier).mean() < 0.1 * earlier.mean()


def test_a_week_that_moved_as_a_whole_is_copied_not_guarded() -> None:
    """The guard replaces a day or two that stray from the earlier weeks (a holiday). When most
    of last week strays, the load moved: replacing it would copy the old level forward (the
    median of copies was 45 % under a x 1.8 shift nine days back)."""
    y = seasonal(24 * 21, level=1000, daily=0.5, weekly=0.6, noise=0.02, seed=5)
    y[24 * 12 :] *= 1.8
    guarded = SeasonalNaive(168, guard=24).fit(y).predict(168).mean
    np.testing.assert_allclose(guarded, y[-168:])
    gap = SeasonalNaiveSES(168, 24).fit(y).predict(168).mean
    assert abs(gap.sum() / y[-168:].sum() - 1) < 0.05


def test_the_recent_median_is_flat_and_ignores_a_burst() -> None:
    y = np.full(72, 100.0)
    y[-5:] = 50_000.0  # five hours of a storm
    p = RecentMedian(24).fit(y).predict(48)
    assert p.mean.tolist() == [100.0] * 48
    assert p.upper[95][0] > p.mean[0]  # the storm shows in the spread, not in the centre


def test_a_week_s_median_sees_the_week_a_day_s_does_not() -> None:
    assert uses_week(RecentMedian(168), 168) and not uses_week(RecentMedian(24), 168)
    assert not uses_week(RecentMedian(72), 168)
    assert uses_week(SeasonalNaiveSES(168, 24), 168) and uses_week(SeasonalNaiveSES(168, 24, log=True), 168)


def test_too_short_histories_are_refused_with_what_they_need() -> None:
    with pytest.raises(FitError, match="snaive168_ses: needs 192 points, got 191"):
        SeasonalNaiveSES(168, 24).fit(np.ones(191))
    with pytest.raises(FitError, match="median72: needs 72 points"):
        RecentMedian(72).fit(np.ones(10))


def test_short_medians_join_only_where_no_daily_season_is_found() -> None:
    from forecast.select import SelectConfig, candidates

    daily = seasonal(24 * 9, level=1000, daily=0.6, noise=0.05, seed=5)
    bursty = np.random.default_rng(6).gamma(0.4, 3000.0, 24 * 9)
    names = {tag: {c.name for c in candidates(y, SelectConfig())} for tag, y in (("daily", daily), ("bursty", bursty))}
    assert "median168" in names["daily"] and not {"median24", "median72"} & names["daily"]
    assert {"median24", "median72", "median168"} <= names["bursty"]
    assert "snaive168_ses[log]" in names["daily"] and "snaive168_ses[log]" in names["bursty"]


def test_a_level_shift_a_week_ago_is_not_added_twice() -> None:
    """A week after a tenant moved in, last week is already at the new level: the smoothed gap
    (the shift) is not added to it again (it was: 1.69 x the actual load); copies from before
    the shift still get it. The day the shift happened is copied partly moved (the gap a copied
    hour holds is the mean of the day up to it)."""
    base = seasonal(24 * 21 + 72, level=1000, daily=0.5, weekly=0.6, noise=0.02, seed=6)
    for days_ago, tolerance in ((7, 0.1), (9, 0.05), (2, 0.05)):
        y = base.copy()
        y[24 * (21 - days_ago) :] *= 1.8
        history, actual = y[: 24 * 21], y[24 * 21 :]
        gap = SeasonalNaiveSES(168, 24, log=True).fit(history).predict(72).mean
        assert abs(gap.sum() / actual.sum() - 1) < tolerance, days_ago
        if days_ago == 7:  # the days after the shift's own day: copied as they were
            assert abs(gap[24:].sum() / actual[24:].sum() - 1) < 0.03


def test_idle_hours_at_the_end_of_the_history_do_not_set_the_gap() -> None:
    """An airport's departures: ~25 an hour by day, 0-2 at night, no change of level. A
    forecast from midnight whose last hour had 0 departures against 1 a week before: on the log
    scale that gap is -1, and smoothed unweighted it halved the next day (as on real data);
    weighted by the load it rests on, the forecast stays at last week's level."""
    rng = np.random.default_rng(8)
    hour = np.arange(24 * 10) % 24
    y = rng.poisson(np.where((hour >= 6) & (hour < 22), 25.0, 0.5)).astype(np.float64)
    y[-3:], y[-3 - 168 : -168] = 0.0, 1.0
    pred = SeasonalNaiveSES(168, 24, log=True).fit(y).predict(24).mean
    copy = SeasonalNaive(168).fit(y).predict(24).mean
    assert abs(pred.sum() / copy.sum() - 1) < 0.1


def test_a_history_without_any_load_forecasts_none_on_the_log_scale() -> None:
    """All idle: no gap has load to weigh it by (the weights fall back to one each), and the
    forecast is zero, finite, with finite residuals."""
    fit = SeasonalNaiveSES(168, 24, log=True).fit(np.zeros(24 * 9))
    pred = fit.predict(72).mean
    assert np.isfinite(pred).all() and np.allclose(pred, 0.0, atol=1e-6)
    assert np.isfinite(fit.residuals[169:]).all()
