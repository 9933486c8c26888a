"""The ranked list the selector fits from: the skill-weighted mean of the best three (with the
seasonal naives as anchors) first, fallbacks after."""

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


def _weighted_miss(misses: dict[str, float], reference: float) -> float:
    """The combination's miss: members weighted by the inverse square of their skill (their
    absolute miss over the reference's, seasonal naive 24's)."""
    weights = {name: (reference / abs(miss)) ** 2 for name, miss in misses.items()}
    return sum(weights[n] * misses[n] for n in misses) / sum(weights.values())


def test_the_weighted_mean_of_the_best_three_leads_and_the_singles_follow_by_skill() -> None:
    pool: list[Forecaster] = [Naive(), SeasonalNaive(24), RecentMedian(24), SeasonalMean(24)]
    origins = [48, 72, 96]
    runs = {"naive": _run(origins, 9.0), "snaive24": _run(origins, 4.0), "median24": _run(origins, 1.0),
            "smean24x7": _run(origins, 2.0)}  # seasonal naive is among the best three: no anchor
    choice = choose(np.ones(120), pool, runs, SelectConfig())
    first = choice.ranked[0]
    assert isinstance(first, Combination) and first.how == "mean"
    assert first.name == "wmean(median24+smean24x7+snaive24)"  # the worst (naive) left out
    assert [c.name for c in choice.ranked[1:]] == ["median24", "smean24x7", "snaive24", "naive"]
    # The combination's backtest is its members' weighted mean at every shared origin: skills
    # 1/4, 1/2 and 1 weigh 16, 4 and 1, so it misses (16 x 1 + 4 x 2 + 1 x 4) / 21.
    miss = _weighted_miss({"median24": 1.0, "smean24x7": 2.0, "snaive24": 4.0}, 4.0)
    assert np.isclose(miss, 28 / 21)
    combined = choice.runs[first.name]
    assert [f.origin for f in combined] == origins
    assert all(np.allclose(f.pred.mean - f.actual, miss) for f in combined)
    assert choice.flags == []
    assert set(choice.scores) == set(runs) | {first.name} and np.isclose(choice.scores[first.name].mae, miss)  # the API lists it too


def test_combination_off_leaves_the_most_skilful_first() -> None:
    pool: list[Forecaster] = [Naive(), SeasonalNaive(24)]
    runs = {"naive": _run([48, 72], 1.0), "snaive24": _run([48, 72], 3.0)}
    choice = choose(np.ones(100), pool, runs, SelectConfig(combine_top=0))
    assert [c.name for c in choice.ranked] == ["naive", "snaive24"]


def test_the_seasonal_naives_join_the_median_when_the_best_three_left_them_out() -> None:
    """The best three by skill (median24, median168, smean24x7) leave both copies out; the copies
    join as anchors, each once, and the combination's backtest is the weighted mean of all five
    members."""
    pool: list[Forecaster] = [Naive(), SeasonalNaive(24), SeasonalNaive(168), RecentMedian(24), SeasonalMean(24),
                              RecentMedian(168, week=168)]
    origins = [192, 216]
    runs = {"naive": _run(origins, 30.0), "median24": _run(origins, 1.0), "smean24x7": _run(origins, 2.0),
            "median168": _run(origins, -1.5), "snaive24": _run(origins, 8.0), "snaive168": _run(origins, -6.0)}
    choice = choose(np.ones(240), pool, runs, SelectConfig())
    first = choice.ranked[0]
    assert isinstance(first, Combination)
    assert first.name == "wmean(median168+median24+smean24x7+snaive168+snaive24)"
    combined = choice.runs[first.name]  # misses 1, 2, -1.5, 8, -6, weighted by skill
    misses = {"median24": 1.0, "smean24x7": 2.0, "median168": -1.5, "snaive24": 8.0, "snaive168": -6.0}
    assert all(np.allclose(f.pred.mean - f.actual, _weighted_miss(misses, 8.0)) for f in combined)
    # without the week in the config only the daily copy can join
    daily = choose(np.ones(240), pool, runs, SelectConfig(long_season=None))
    assert daily.ranked[0].name == "wmean(median168+median24+smean24x7+snaive24)"


def test_an_anchor_that_was_not_judged_does_not_join() -> None:
    pool: list[Forecaster] = [Naive(), SeasonalNaive(24), RecentMedian(24), SeasonalMean(24)]
    runs = {"naive": _run([48, 72], 3.0), "median24": _run([48, 72], 1.0), "smean24x7": _run([48, 72], 2.0)}
    choice = choose(np.ones(100), pool, runs, SelectConfig())
    assert choice.ranked[0].name == "wmean(median24+naive+smean24x7)"
