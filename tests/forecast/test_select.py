"""Model choice by backtest, fallbacks and robustness on awkward series."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from forecast.baselines import Naive
from forecast.select import SelectConfig, candidates, forecast_series, is_seasonal
from forecast.types import F64, FitError, FitInfo, Fitted, Prediction
from tests.forecast.synthetic import seasonal


def wape(actual: F64, pred: F64) -> float:
    return float(np.abs(actual - pred).sum() / np.abs(actual).sum())


def test_known_seasonality_and_trend_within_error_bounds() -> None:
    y = seasonal(24 * 28 + 72, level=500, daily=0.5, trend_per_day=0.01, noise=0.03, seed=11)
    result = forecast_series(y[:-72], 72)
    assert wape(y[-72:], result.prediction.mean) < 0.06
    assert result.model not in ("naive", "drift")
    assert result.backtest is not None and result.backtest.wape < 0.1
    assert result.flags == ()
    assert set(result.scores) >= {"naive", "snaive24", "ets_AAdA24"}


def test_weekly_models_join_from_one_week_and_the_decomposition_from_two() -> None:
    three_weeks = seasonal(24 * 21, seed=3)

    def names(n: int) -> list[str]:
        return [c.name for c in candidates(three_weeks[:n], SelectConfig())]

    assert "snaive168" not in names(167) and "daytype24x7" not in names(167)
    assert {"snaive168", "daytype24x7"} <= set(names(168)) and "smedian168x4_level" not in names(335)
    assert "smedian168x4_level" in names(336) and "stl_ets168[log]" not in names(336)
    assert "stl_ets168[log]" in names(337)
    y = seasonal(24 * 35 + 72, level=300, daily=0.3, weekly=0.5, noise=0.03, seed=12)
    result = forecast_series(y[:-72], 72)
    assert wape(y[-72:], result.prediction.mean) < 0.07


def test_short_history_falls_back_and_says_so() -> None:
    result = forecast_series(np.array([5.0, 6.0, 7.0]), 24)
    assert "short_history" in result.flags
    assert result.model == "naive"
    assert result.prediction.mean.tolist() == [7.0] * 24
    one_day = forecast_series(seasonal(30, seed=1), 24)
    assert "short_history" in one_day.flags and one_day.model == "snaive24"


def test_no_data() -> None:
    result = forecast_series(np.full(48, np.nan), 12)
    assert result.failed and "no_data" in result.flags
    assert np.isnan(result.prediction.mean).all()


def test_constant_series() -> None:
    result = forecast_series(np.full(24 * 10, 42.0), 72)
    assert "constant" in result.flags
    assert result.prediction.mean.tolist() == [42.0] * 72
    np.testing.assert_array_equal(result.prediction.lower[95], result.prediction.upper[95])
    zeros = forecast_series(np.zeros(100), 10)
    assert zeros.prediction.mean.tolist() == [0.0] * 10


def test_nan_gaps_are_filled_and_not_scored() -> None:
    rng = np.random.default_rng(3)
    y = seasonal(24 * 21 + 72, level=100, daily=0.4, noise=0.03, seed=13)
    holed = y.copy()
    holed[rng.random(holed.shape[0]) < 0.1] = np.nan
    holed[24 * 10 : 24 * 10 + 30] = np.nan  # a 30-hour outage
    holed[:5] = np.nan  # the series started late
    result = forecast_series(holed[:-72], 72)
    assert "gaps_filled" in result.flags
    assert result.observations == int(np.isfinite(holed[:-72]).sum())
    assert wape(y[-72:], result.prediction.mean) < 0.08
    trailing = holed[:-72].copy()
    trailing[-3:] = np.nan
    assert "trailing_gap" in forecast_series(trailing, 24).flags


def test_level_shift_follows_the_new_level() -> None:
    y = seasonal(24 * 28 + 72, level=100, daily=0.3, noise=0.03, seed=14)
    y[-72 - 24 * 6 :] *= 2.0  # doubled six days before the forecast origin
    result = forecast_series(y[:-72], 72)
    assert abs(result.prediction.mean.mean() / y[-72:].mean() - 1) < 0.1


def test_zeros_bursts_and_resets_never_go_negative() -> None:
    y = seasonal(24 * 21, level=100, daily=0.9, noise=0.3, seed=15)
    t = np.arange(y.shape[0])
    y[(t % 24) < 6] = 0.0  # idle nights
    y[300:303] *= 20  # a burst
    y[400] = -5e6  # an upstream counter reset, not corrected
    result = forecast_series(y, 72)
    assert "negative_dropped" in result.flags
    p = result.prediction
    for arr in (p.mean, p.lower[80], p.lower[95], p.upper[80], p.upper[95]):
        assert (arr >= 0).all() and np.isfinite(arr).all()
    assert p.mean.max() < 5 * np.nanmax(np.where(y > 0, y, np.nan)[-24 * 7 :])


class _Broken:
    name = "broken"
    min_length = 1

    def fit(self, y: F64) -> Fitted:
        raise FitError("always fails")


class _Stubborn:
    """Best in the backtest, but its final fit does not converge."""

    name = "stubborn"
    min_length = 1

    def __init__(self) -> None:
        self.calls = 0

    def fit(self, y: F64) -> Fitted:
        self.calls += 1
        return _StubbornFit(y, converged=self.calls <= 3)


class _StubbornFit:
    def __init__(self, y: F64, converged: bool) -> None:
        self.y = y
        self.info = FitInfo(converged=converged, warnings=["ConvergenceWarning: gave up"])
        self.residuals = np.zeros_like(y)

    def predict(self, h: int, levels: Sequence[int] = (80, 95)) -> Prediction:
        # a perfect oracle for the linear test series below
        n = self.y.shape[0]
        mean = (
            self.y[-1] + np.arange(1, h + 1) * (self.y[-1] - self.y[-2]) if n > 1 else np.full(h, self.y[-1])
        )
        return Prediction.gaussian(mean, np.ones(h), levels)


def test_failures_and_nonconvergence_fall_back_and_are_flagged() -> None:
    stubborn = _Stubborn()
    y = np.arange(200, dtype=np.float64)
    result = forecast_series(
        y,
        24,
        SelectConfig(combine_top=0),
        candidate_fn=lambda y, cfg: [Naive(), _Broken(), stubborn],
    )
    assert "fallback" in result.flags
    assert result.model == "naive"
    assert "stubborn" in result.scores and "broken" not in result.scores
    assert any("broken at origin" in w for w in result.warnings)
    assert any("stubborn: optimiser did not converge" in w for w in result.warnings)


def test_no_library_warning_escapes() -> None:
    y = seasonal(24 * 22, level=100, daily=0.9, noise=0.6, seed=16)
    y[::7] = 0.0
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        forecast_series(y, 72)
    assert escaped == []


def test_interval_coverage_in_backtests() -> None:
    """Share of actuals inside the 80 % band over 72 h rolling-origin backtests: 70-90 %."""
    seed = 21
    rng = np.random.default_rng(seed)
    inside = total = 0
    for k in range(6):
        y = seasonal(
            24 * 16 + 72 + 48,
            level=rng.uniform(50, 500),
            daily=rng.uniform(0.2, 0.6),
            weekly=rng.uniform(0.0, 0.3),
            trend_per_day=rng.uniform(-0.005, 0.01),
            noise=rng.uniform(0.05, 0.2),
            seed=seed * 100 + k,
        )
        for o in (y.shape[0] - 72 - 48, y.shape[0] - 72 - 24, y.shape[0] - 72):
            p = forecast_series(y[:o], 72).prediction
            actual = y[o : o + 72]
            inside += int(((actual >= p.lower[80]) & (actual <= p.upper[80])).sum())
            total += 72
    assert 0.70 <= inside / total <= 0.90, inside / total


def test_seasonality_test_gates_the_candidates() -> None:
    daily = seasonal(24 * 10, daily=0.5, noise=0.05, seed=30)
    flat = np.random.default_rng(31).normal(100, 5, 24 * 10)
    assert is_seasonal(daily, 24) and not is_seasonal(flat, 24)
    assert not is_seasonal(np.ones(100), 24) and not is_seasonal(daily[:30], 24)
    on_daily = {c.name for c in candidates(daily, SelectConfig())}
    on_flat = {c.name for c in candidates(flat, SelectConfig())}
    assert "ets_AAdA24" in on_daily and "ets_AAdN" not in on_daily
    assert "ets_AAdN" in on_flat and "ets_AAdA24" not in on_flat
    opt_in = {c.name for c in candidates(daily, SelectConfig(use_sarimax=True, use_multiplicative=True))}
    assert {"sarimax_f24x3[log]", "ets_MAdM24"} <= opt_in
