"""Ranking backtested candidates fairly when they could not all be tested at the same origins.

A weekly model needs a week of history before its first forecast, so on a history of eight
days it has a backtest at one origin where the daily models have five. Comparing pooled errors
over different origins would reward whoever skipped the hard days. :func:`rank` therefore
compares every candidate on the **same** origins: the origins common to all candidates, as
long as they hold at least ``min_points`` observed points; when they do not, the candidates
with the fewest origins are set aside (returned as ``unjudged``) until the rest share enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from forecast.backtest import OriginForecast, score

Runs = Mapping[str, Sequence[OriginForecast]]


@dataclass(frozen=True)
class Ranking:
    order: list[tuple[float, str]]  # (MAE on the common origins, name), best first
    origins: frozenset[int]  # the origins they were compared on
    unjudged: list[str]  # candidates with too few origins to be compared yet


def on_origins(forecasts: Sequence[OriginForecast], origins: frozenset[int]) -> list[OriginForecast]:
    return [f for f in forecasts if f.origin in origins]


def _points(forecasts: Sequence[OriginForecast]) -> int:
    return sum(int(f.mask.sum()) for f in forecasts)


def rank(runs: Runs, preference: Sequence[str], min_points: int = 24) -> Ranking:
    """Rank ``runs`` (candidate name -> backtest forecasts) by MAE on a common set of origins;
    ties go to the candidate earlier in ``preference`` (simplest first)."""
    alive = [name for name in preference if runs.get(name)]
    unjudged: list[str] = []
    while alive:
        common = frozenset.intersection(*(frozenset(f.origin for f in runs[n]) for n in alive))
        # Every candidate must have enough points there (a later origin may forecast fewer steps).
        if common and min(_points(on_origins(runs[n], common)) for n in alive) >= min_points:
            order = sorted(
                ((score(on_origins(runs[n], common)).mae, n) for n in alive),
                key=lambda item: (item[0], preference.index(item[1])),
            )
            return Ranking(order, common, unjudged)
        fewest = min(len(runs[n]) for n in alive)
        if all(len(runs[n]) == fewest for n in alive):
            break  # nothing left to set aside: too little backtest for anyone
        unjudged += [n for n in alive if len(runs[n]) == fewest]
        alive = [n for n in alive if len(runs[n]) > fewest]
    return Ranking([], frozenset(), unjudged + alive)
