"""The ranked list the selector fits from: the median of the best three first, fallbacks after."""

from __future__ import annotations

import numpy as np

from forecast.backtest import OriginForecast
from forecast.baselines import Naive, RecentMedian, SeasonalMean, SeasonalNaive
from forecast.choose import choose
from forecast.combine import Combination
from forecast.select import SelectConfig
from forecast.types import Forecaster, Prediction


def _run(origins: list[int], miss: float, h: int = 24) -> list[OriginForecast]:
    actual = np.full(h, 100.0)
    return [
        OriginForecast(o, actual, np.ones(h, np.bool_), Prediction(actual + miss, {}, {}), 1.0) for o in origins
    ]


def test_the_median_of_the_best_three_leads_and_the_singles_follow_by_skill() -> None:
    pool: list[Forecaster] = [Naive(), SeasonalNaive(24), RecentMedian(24), SeasonalMean(24)]
    origins = [48, 72, 96]
    runs = {"naive": _run(origins, 9.0), "snaive24": _run(origins, 4.0), "median24": _run(origins, 1.0),
            "smean24x7": _run(origins, 2.0)}
    choice = choose(np.ones(120), pool, runs, SelectConfig())
    first = choice.ranked[0]
    assert isinstance(first, Combination) and first.how == "median"
    assert first.name == "median(median24+smean24x7+snaive24)"  # the worst (naive) left out
    assert [c.name for c in choice.ranked[1:]] == ["median24", "smean24x7", "snaive24", "naive"]
    # The combination's backtest is its members' median at every shared origin: miss 2.
    combined = choice.runs[first.name]
    assert [f.origin for f in combined] == origins
    assert all(np.allclose(f.pred.mean - f.actual, 2.0) for f in combined)
    assert choice.flags == []
    assert set(choice.scores) == set(runs) | {first.name} and np.isclose(choice.scores[first.name].mae, 2.0)  # the API lists it too


def test_combination_off_leaves_the_most_skilful_first() -> None:
    pool: list[Forecaster] = [Naive(), SeasonalNaive(24)]
    runs = {"naive": _run([48, 72], 1.0), "snaive24": _run([48, 72], 3.0)}
    choice = choose(np.ones(100), pool, runs, SelectConfig(combine_top=0))
    assert [c.name for c in choice.ranked] == ["naive", "snaive24"]
