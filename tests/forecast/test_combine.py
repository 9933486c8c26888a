"""Forecast combinations (forecast.combine): mean, weighted mean and median of point forecasts
and interval bounds; bad weights are refused with what was given."""

from __future__ import annotations

import numpy as np
import pytest

from forecast.baselines import Naive, SeasonalNaive
from forecast.combine import Combination, combine
from forecast.types import Prediction


def _pred(level: float) -> Prediction:
    mean = np.full(3, level)
    return Prediction(mean, {80: mean - 1}, {80: mean + 1})


def test_weighted_mean_median_and_mean_of_points_and_bounds() -> None:
    preds = [_pred(10.0), _pred(20.0), _pred(60.0)]
    weighted = combine(preds, "mean", [3.0, 1.0, 1.0])
    np.testing.assert_allclose(weighted.mean, (3 * 10 + 20 + 60) / 5)
    np.testing.assert_allclose(weighted.upper[80], (3 * 11 + 21 + 61) / 5)
    np.testing.assert_allclose(combine(preds, "median").lower[80], 19.0)
    np.testing.assert_allclose(combine(preds, "mean").mean, 30.0)


@pytest.mark.parametrize(
    ("how", "weights", "message"),
    [
        ("mean", [1.0, 0.0], r"one positive weight a forecast, got \[1.0, 0.0\]"),
        ("mean", [1.0], r"got \[1.0\]"),
        ("mean", [1.0, float("nan")], r"got \[1.0, nan\]"),
        ("median", [1.0, 1.0], r"weights need a mean"),
        ("mode", None, r"unknown combination 'mode'"),
    ],
)
def test_bad_weights_or_kinds_are_refused(how: str, weights: list[float] | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        combine([_pred(1.0), _pred(2.0)], how, weights)
    with pytest.raises(ValueError, match="nothing to combine"):
        combine([], "mean")


def test_a_weighted_combination_is_named_and_fits_its_members() -> None:
    y = np.arange(1.0, 49.0)
    combo = Combination([Naive(), SeasonalNaive(24)], "mean", [1.0, 3.0])
    assert combo.name == "wmean(naive+snaive24)" and combo.min_length == 24
    got = combo.fit(y).predict(4).mean
    np.testing.assert_allclose(got, (1 * 48.0 + 3 * y[24:28]) / 4)
