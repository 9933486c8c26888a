"""The conformal errors' scale has a floor: a backtest forecast of zero for an idle stretch that
met a burst is an error to learn from, not an infinite one to drop, and the band served around
a zero forecast has a width."""

from __future__ import annotations

import numpy as np

from forecast.backtest import OriginForecast
from forecast.conformal import FLOOR_SHARE, bands, origin_errors, scale_floor
from forecast.select import forecast_series
from forecast.types import Prediction


def _zero_forecast_met_by_a_burst(origin: int) -> OriginForecast:
    actual = np.zeros(24)
    actual[6:9] = 500.0
    return OriginForecast(origin, actual, np.ones(24, np.bool_), Prediction(np.zeros(24), {}, {}), 1.0)


def test_the_floor_is_a_share_of_the_history_s_level() -> None:
    y = np.array([0.0, 0.0, 300.0, np.nan, 100.0])
    assert np.isclose(scale_floor(y), FLOOR_SHARE * 100.0)
    assert scale_floor(np.array([np.nan])) == 0.0


def test_errors_of_a_zero_forecast_are_kept_with_the_floor() -> None:
    f = _zero_forecast_met_by_a_burst(100)
    assert origin_errors(f).scaled.shape[0] == 0  # without a floor every step divides by zero
    kept = origin_errors(f, floor=10.0)
    assert kept.scaled.shape[0] == 24 and np.isclose(kept.scaled.max(), 50.0)
    b = bands([origin_errors(_zero_forecast_met_by_a_burst(o), 10.0) for o in (100, 124, 148)], 24, (80, 95))
    assert b is not None
    served = b.apply(np.zeros(24), 10.0)
    assert (served.upper[95] > 0).all() and (served.upper[95] >= served.upper[80]).all()


def test_an_idle_series_gets_a_band_that_covers_its_bursts() -> None:
    """Mostly idle hours with a burst now and then (a batch tenant): the median forecast is zero
    almost everywhere, and the 95 % band still reaches the bursts' height."""
    rng = np.random.default_rng(7)
    n = 24 * 16
    y = np.zeros(n)
    bursts = rng.choice(n, size=n // 12, replace=False)
    y[bursts] = rng.gamma(2.0, 200.0, bursts.shape[0])
    result = forecast_series(y, 72)
    assert "intervals_from_model" not in result.flags
    assert np.median(result.prediction.upper[95]) > 0.2 * np.median(y[bursts])
