"""Candidates are ranked by their skill against seasonal naive on the very origins and steps
each was tested on; those with too little backtest are set aside."""

from __future__ import annotations

import numpy as np

from forecast.backtest import OriginForecast
from forecast.ranking import rank, rank_on_common, relative_skill
from forecast.types import Prediction


def _run(origins: list[int], error_at: dict[int, float], h: int = 24, default: float = 1.0) -> list[OriginForecast]:
    out = []
    for o in origins:
        actual = np.full(h, 100.0)
        pred = Prediction(actual + error_at.get(o, default), {}, {})
        out.append(OriginForecast(o, actual, np.ones(h, dtype=np.bool_), pred, 1.0))
    return out


def test_skipping_the_hard_days_neither_helps_nor_hurts() -> None:
    # Origin 48 is hard for everyone: seasonal naive misses by 20 there and by 2 later. "daily"
    # misses by 20 at 48 and by 1 after; "weekly" exists only at 168 and 192 and misses by 2.
    # Pooled over their own origins daily would look worse (MAE 7.3 vs 2); against the
    # reference on the same days daily is the more skilful.
    runs = {
        "snaive24": _run([48, 168, 192], {48: 20.0}, default=2.0),
        "daily": _run([48, 168, 192], {48: 20.0, 168: 1.0, 192: 1.0}),
        "weekly": _run([168, 192], {}, default=2.0),
    }
    ranking = rank(runs, ["snaive24", "daily", "weekly"], reference="snaive24")
    assert [name for _, name in ranking.order] == ["daily", "snaive24", "weekly"]  # weekly ties the reference: simpler first
    assert np.isclose(ranking.order[0][0], (20 + 1 + 1) / (20 + 2 + 2))
    assert ranking.unjudged == []


def test_a_model_judged_on_one_day_is_compared_on_that_day_s_steps_only() -> None:
    # The reference forecast 72 steps from origin 192; the weekly model only 24 (what was left of
    # the history). The reference misses by 1 on the first day and by 10 after it.
    reference = [OriginForecast(192, np.full(72, 100.0), np.ones(72, np.bool_),
                                Prediction(np.r_[np.full(24, 101.0), np.full(48, 110.0)], {}, {}), 1.0)]
    weekly = _run([192], {}, default=2.0)
    assert relative_skill(weekly, reference) == 2.0  # not 2 / (mean of 1 and 10)
    assert relative_skill(_run([999], {}), reference) == float("inf")  # no day in common


def test_too_little_backtest_is_set_aside_and_ties_go_to_the_simpler() -> None:
    runs = {
        "snaive24": _run([48, 72, 96], {}),
        "naive": _run([48, 72, 96], {}),
        "weekly": _run([96], {}, h=12),  # 12 points: under the 24 needed
    }
    ranking = rank(runs, ["naive", "snaive24", "weekly"], reference="snaive24")
    assert ranking.unjudged == ["weekly"]
    assert [name for _, name in ranking.order] == ["naive", "snaive24"]  # equal skill: listed order


def test_without_the_reference_candidates_are_compared_on_shared_origins() -> None:
    runs = {
        "daily": _run([48, 168, 192], {48: 20.0, 168: 1.0, 192: 1.0}),
        "weekly": _run([168, 192], {168: 2.0, 192: 2.0}),
    }
    ranking = rank(runs, ["daily", "weekly"], reference="snaive24")  # not among the runs
    assert ranking == rank_on_common(runs, ["daily", "weekly"])
    assert [name for _, name in ranking.order] == ["daily", "weekly"] and ranking.order[0][0] == 1.0
    thin = {"naive": _run([48, 72, 96], {}), "ets": _run([48, 72, 96], {}), "weekly": _run([96], {}, h=12)}
    assert rank_on_common(thin, ["naive", "ets", "weekly"]).unjudged == ["weekly"]
    assert rank_on_common({"a": _run([1], {}, h=5)}, ["a"]).order == []
