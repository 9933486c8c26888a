"""The models one by one: baselines against hand-computed values, the statsmodels adapters
on series of known shape, failures as FitError, warnings captured."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from forecast.arima import FourierSARIMAX
from forecast.baselines import Drift, LinearTrend, LogScale, Naive, SeasonalMean, SeasonalNaive
from forecast.ets import ETS, Decomposed
from forecast.types import FitError, Prediction, Z
from tests.forecast.synthetic import seasonal


def test_naive_intervals_grow_with_sqrt_h() -> None:
    y = np.array([1.0, 3.0, 2.0, 4.0])  # one-step residuals 2, -1, 2 -> sigma = sqrt(3)
    p = Naive().fit(y).predict(4)
    assert p.mean.tolist() == [4.0] * 4
    sigma = math.sqrt(3.0)
    np.testing.assert_allclose(p.upper[80] - p.mean, Z[80] * sigma * np.sqrt([1, 2, 3, 4]))
    np.testing.assert_allclose(p.mean - p.lower[95], Z[95] * sigma * np.sqrt([1, 2, 3, 4]))


def test_seasonal_naive_repeats_the_last_season() -> None:
    y = np.array([1.0, 2.0, 3.0, 2.0, 3.0, 4.0])  # residuals at lag 3: 1, 1, 1 -> sigma 1
    p = SeasonalNaive(3).fit(y).predict(7)
    assert p.mean.tolist() == [2.0, 3.0, 4.0, 2.0, 3.0, 4.0, 2.0]
    np.testing.assert_allclose(p.upper[80] - p.mean, Z[80] * np.sqrt([1, 1, 1, 2, 2, 2, 3]))


def test_drift_and_linear_trend() -> None:
    y = np.arange(10, dtype=np.float64) * 2.0 + 5.0
    np.testing.assert_allclose(Drift().fit(y).predict(3).mean, [25.0, 27.0, 29.0])
    np.testing.assert_allclose(LinearTrend(6).fit(y).predict(2).mean, [25.0, 27.0])


def test_seasonal_mean_averages_the_last_cycles() -> None:
    y = np.array([1.0, 10.0, 3.0, 20.0, 5.0, 30.0])
    p = SeasonalMean(2, cycles=2).fit(y).predict(3)
    assert p.mean.tolist() == [4.0, 25.0, 4.0]


def test_baselines_refuse_too_short_history() -> None:
    with pytest.raises(FitError):
        SeasonalNaive(24).fit(np.ones(10))


def test_ets_learns_daily_season_and_trend() -> None:
    y = seasonal(24 * 21 + 72, level=100, daily=0.4, trend_per_day=0.01, noise=0.02, seed=1)
    train, test = y[:-72], y[-72:]
    fit = ETS("add", "add", damped=True, seasonal="add", period=24).fit(train)
    p = fit.predict(72)
    assert np.mean(np.abs(p.mean - test)) / np.mean(test) < 0.05
    assert (p.lower[95] <= p.lower[80]).all() and (p.lower[80] <= p.mean).all()
    assert (p.mean <= p.upper[80]).all() and (p.upper[80] <= p.upper[95]).all()
    assert fit.info.converged


def test_multiplicative_ets_simulated_intervals_are_reproducible() -> None:
    y = seasonal(24 * 10, level=50, daily=0.3, noise=0.03, seed=2)
    model = ETS("mul", None, seasonal="mul", period=24, seed=3)
    assert model.name == "ets_MNM24"
    a, b = model.fit(y).predict(24), model.fit(y).predict(24)
    np.testing.assert_array_equal(a.upper[80], b.upper[80])
    assert (a.lower[80] < a.upper[80]).all()
    with pytest.raises(FitError, match="strictly positive"):
        model.fit(np.concatenate([y, [0.0]]))


def test_ets_rejects_constant_and_short_series() -> None:
    with pytest.raises(FitError, match="constant"):
        ETS(seasonal=None).fit(np.full(100, 3.0))
    with pytest.raises(FitError, match="needs"):
        ETS(period=24).fit(np.ones(30) + np.arange(30))


def test_decomposed_learns_weekly_pattern() -> None:
    y = seasonal(24 * 28 + 72, level=200, daily=0.3, weekly=0.4, noise=0.03, seed=4)
    train, test = y[:-72], y[-72:]
    p = LogScale(Decomposed((24, 168))).fit(train).predict(72)
    assert np.mean(np.abs(p.mean - test)) / np.mean(test) < 0.06


def test_fourier_sarimax_fits_the_cheap_way() -> None:
    y = seasonal(24 * 6 + 24, level=80, daily=0.4, noise=0.03, seed=5)
    p = FourierSARIMAX((24,), (2,)).fit(y[:-24]).predict(24)
    assert np.mean(np.abs(p.mean - y[-24:])) / np.mean(y) < 0.08


def test_log_scale_is_never_negative_and_keeps_quantiles_ordered() -> None:
    rng = np.random.default_rng(0)
    y = np.where(rng.random(200) < 0.3, 0.0, rng.gamma(2.0, 50.0, 200))
    p = LogScale(Naive()).fit(y).predict(48)
    for arr in (p.mean, p.lower[80], p.lower[95], p.upper[80], p.upper[95]):
        assert (arr >= 0).all()
    assert (p.lower[95] <= p.lower[80]).all() and (p.upper[80] <= p.upper[95]).all()


def test_nonconvergence_and_warnings_are_captured_not_printed() -> None:
    y = seasonal(24 * 8, level=100, daily=0.5, noise=0.2, seed=6)
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        fit = ETS("add", "add", damped=True, seasonal="add", period=24, maxiter=1).fit(y)
        fit.predict(24)
    assert escaped == []
    assert not fit.info.converged
    assert any("ConvergenceWarning" in w for w in fit.info.warnings)


def test_prediction_clipped() -> None:
    p = Prediction.gaussian(np.array([1.0, -1.0]), np.array([1.0, 1.0]), (80, 95)).clipped()
    assert p.mean.tolist() == [1.0, 0.0]
    assert (p.lower[95] >= 0).all()


@pytest.mark.parametrize(
    "model",
    [Naive(), SeasonalNaive(24), SeasonalMean(24), Drift(), ETS(period=24), LogScale(ETS(period=24))],
    ids=lambda m: m.name,
)
def test_models_accept_nan_gaps(model: object) -> None:
    y = seasonal(24 * 8, level=100, daily=0.4, noise=0.05, seed=7)
    y[:3] = np.nan
    y[50:80] = np.nan
    y[-2] = np.nan
    p = model.fit(y).predict(24)  # type: ignore[attr-defined]
    assert np.isfinite(p.mean).all() and np.isfinite(p.upper[95]).all()
    with pytest.raises(FitError):
        model.fit(np.full(100, np.nan))  # type: ignore[attr-defined]
