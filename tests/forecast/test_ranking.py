"""Candidates are compared on the origins they share; those with too few are set aside."""

from __future__ import annotations

import numpy as np

from forecast.backtest import OriginForecast
from forecast.ranking import rank
from forecast.types import Prediction


def _run(origins: list[int], error_at: dict[int, float], h: int = 24) -> list[OriginForecast]:
    out = []
    for o in origins:
        actual = np.full(h, 100.0)
        pred = Prediction(actual + error_at.get(o, 1.0), {}, {})
        out.append(OriginForecast(o, actual, np.ones(h, dtype=np.bool_), pred, 1.0))
    return out


def test_compared_on_shared_origins_not_on_who_skipped_the_hard_days() -> None:
    # "daily" misses by 20 on the early, hard origin 48 and by 1 after; "weekly" exists only at
    # 168 and 192, where it misses by 2. Pooled over their own origins daily would look worse.
    runs = {
        "daily": _run([48, 168, 192], {48: 20.0, 168: 1.0, 192: 1.0}),
        "weekly": _run([168, 192], {168: 2.0, 192: 2.0}),
    }
    ranking = rank(runs, ["daily", "weekly"])
    assert ranking.origins == frozenset({168, 192})
    assert [name for _, name in ranking.order] == ["daily", "weekly"]
    assert ranking.order[0][0] == 1.0 and ranking.unjudged == []


def test_too_few_shared_points_set_the_thinnest_aside_and_ties_go_to_the_simpler() -> None:
    runs = {
        "naive": _run([48, 72, 96], {}),
        "ets": _run([48, 72, 96], {}),
        "weekly": _run([96], {}, h=12),  # 12 points in common: under the 24 needed
    }
    ranking = rank(runs, ["naive", "ets", "weekly"])
    assert ranking.unjudged == ["weekly"]
    assert [name for _, name in ranking.order] == ["naive", "ets"]  # equal errors: listed order
    assert rank({"a": _run([1], {}, h=5)}, ["a"]).order == []
