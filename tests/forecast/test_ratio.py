"""Cost per 1M tokens from the spend and token forecasts."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from forecast.ratio import check_against_direct, historical_ratio, ratio_prediction, residual_correlation
from forecast.select import forecast_series
from forecast.types import Prediction, Z


def lognormal(median: float, sigma: float, h: int = 3) -> Prediction:
    """Quantiles of a lognormal with the given median and log-sd, every hour alike."""
    m = np.full(h, median)
    return Prediction(
        m,
        {lv: m * np.exp(-Z[lv] * sigma) for lv in (80, 95)},
        {lv: m * np.exp(Z[lv] * sigma) for lv in (80, 95)},
    )


def test_point_forecast_is_the_ratio_so_the_three_agree() -> None:
    spend, tokens = lognormal(10.0, 0.1), lognormal(4e6, 0.1)
    pred, flags = ratio_prediction(spend, tokens, rho=0.0, rng=np.random.default_rng(0))
    np.testing.assert_allclose(pred.mean, 10.0 / 4e6 * 1e6)
    assert flags == ()


def test_simulated_intervals_match_the_lognormal_ratio() -> None:
    """log(spend/tokens) is normal with variance s1^2 + s2^2 - 2 rho s1 s2: compare quantiles."""
    s1, s2 = 0.2, 0.3
    for rho in (0.0, 0.6):
        pred, _ = ratio_prediction(
            lognormal(10.0, s1), lognormal(5e6, s2), rho=rho, rng=np.random.default_rng(1), draws=20000
        )
        sd = np.sqrt(s1 * s1 + s2 * s2 - 2 * rho * s1 * s2)
        centre = 10.0 / 5e6 * 1e6
        for lv in (80, 95):
            z = NormalDist().inv_cdf(0.5 + lv / 200)
            np.testing.assert_allclose(pred.upper[lv], centre * np.exp(z * sd), rtol=0.04)
            np.testing.assert_allclose(pred.lower[lv], centre * np.exp(-z * sd), rtol=0.04)


def test_positive_correlation_narrows_the_ratio() -> None:
    wide, _ = ratio_prediction(lognormal(1, 0.3), lognormal(1e6, 0.3), rho=0.0, rng=np.random.default_rng(2))
    narrow, _ = ratio_prediction(
        lognormal(1, 0.3), lognormal(1e6, 0.3), rho=0.9, rng=np.random.default_rng(2)
    )
    assert (narrow.upper[80] - narrow.lower[80] < 0.6 * (wide.upper[80] - wide.lower[80])).all()


def test_zero_tokens_make_the_ratio_undefined_not_infinite() -> None:
    spend = lognormal(5.0, 0.1, h=2)
    tokens = Prediction(
        np.array([0.0, 1e6]), {80: np.zeros(2), 95: np.zeros(2)}, {80: np.full(2, 2e6), 95: np.full(2, 3e6)}
    )
    pred, flags = ratio_prediction(spend, tokens, rho=0.0, rng=np.random.default_rng(3))
    assert np.isnan(pred.mean[0]) and pred.mean[1] == 5.0
    assert "ratio_undefined" in flags and "ratio_unbounded" in flags
    assert np.isnan(pred.upper[95]).all()


def test_residual_correlation_aligns_at_the_end() -> None:
    rng = np.random.default_rng(4)
    common = rng.normal(size=200)
    a = np.concatenate([rng.normal(size=50), common])  # longer history, same last 200 hours
    b = common * 2 + rng.normal(scale=0.1, size=200)
    assert residual_correlation(a, b) > 0.95
    assert residual_correlation(a[:10], b[:10]) == 0.0  # too few points
    assert residual_correlation(np.ones(100), b[:100]) == 0.0


def test_check_against_direct_forecast() -> None:
    t = np.arange(24 * 10, dtype=np.float64)
    tokens = 1e6 * (1.5 + np.sin(2 * np.pi * t / 24))
    spend = 2.0 + tokens * 1e-6  # $2/h fixed + $1 per 1M tokens
    hist = historical_ratio(spend, tokens)
    assert np.isfinite(hist).all()
    np.testing.assert_allclose(hist, spend / tokens * 1e6)
    direct = forecast_series(hist, 24)
    fs, ft = forecast_series(spend, 24), forecast_series(tokens, 24)
    pred, _ = ratio_prediction(fs.prediction, ft.prediction, rho=0.9, rng=np.random.default_rng(5))
    check = check_against_direct(pred, direct)
    assert check.mean_rel_diff < 0.05
    assert check.direct_inside80 > 0.9
    assert np.isnan(historical_ratio(np.array([1.0]), np.array([0.0]))).all()
