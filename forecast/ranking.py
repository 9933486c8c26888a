"""Ranking backtested candidates fairly when they could not all be tested at the same origins.

A weekly model needs a week of history before its first forecast, so on a history of eight
days it has a backtest at one origin (forecasting 24 h) where the daily models have five
(forecasting 72 h). Comparing pooled errors over different origins would reward whoever
skipped the hard days; comparing only on the origins all share throws most of the backtest
away and ranks every model on one day.

:func:`rank` therefore scores each candidate by its **skill relative to a reference** (seasonal
naive of the short season): its absolute errors over its own origins and steps, divided by the
reference's errors over exactly the same origins and steps. A hard day is hard for the
reference too, so skipping it neither helps nor hurts, and every model keeps all of its
backtest. Candidates with fewer than ``min_points`` observed points are set aside (returned as
``unjudged``). Without the reference among the runs, candidates are compared by MAE on the
origins they share (:func:`rank_on_common`), setting the thinnest aside until the rest share
enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from forecast.backtest import OriginForecast, score

Runs = Mapping[str, Sequence[OriginForecast]]


@dataclass(frozen=True)
class Ranking:
    order: list[tuple[float, str]]  # (relative skill or common-origin MAE, name), best first
    unjudged: list[str]  # candidates with too little backtest to be compared yet


def on_origins(forecasts: Sequence[OriginForecast], origins: frozenset[int]) -> list[OriginForecast]:
    return [f for f in forecasts if f.origin in origins]


def _points(forecasts: Sequence[OriginForecast]) -> int:
    return sum(int(f.mask.sum()) for f in forecasts)


def _abs_error(f: OriginForecast, pred_mean: np.ndarray) -> float:
    steps = f.actual.shape[0]
    return float(np.abs(f.actual - pred_mean[:steps])[f.mask].sum())


def relative_skill(forecasts: Sequence[OriginForecast], reference: Sequence[OriginForecast]) -> float:
    """Sum of absolute errors of ``forecasts`` over the reference's on the same origins and
    steps (``inf`` where the reference has none of them; both perfect counts as 1)."""
    by_origin = {f.origin: f for f in reference}
    own = ref = 0.0
    compared = 0
    for f in forecasts:
        r = by_origin.get(f.origin)
        if r is None or r.pred.mean.shape[0] < f.actual.shape[0]:
            continue
        own += _abs_error(f, f.pred.mean)
        ref += _abs_error(f, r.pred.mean)
        compared += 1
    if ref > 0:
        return own / ref
    return 1.0 if compared and own == 0 else float("inf")


def rank(runs: Runs, preference: Sequence[str], reference: str | None = None, min_points: int = 24) -> Ranking:
    """Rank ``runs`` (candidate name -> backtest forecasts) by skill relative to ``reference``,
    best first; ties go to the candidate earlier in ``preference`` (simplest first)."""
    if reference is None or not runs.get(reference):
        return rank_on_common(runs, preference, min_points)
    alive = [name for name in preference if runs.get(name)]
    unjudged = [name for name in alive if _points(runs[name]) < min_points]
    judged = [name for name in alive if name not in unjudged]
    skills = {name: relative_skill(runs[name], runs[reference]) for name in judged}
    order = sorted(
        ((skills[n], n) for n in judged if np.isfinite(skills[n])),
        key=lambda item: (item[0], preference.index(item[1])),
    )
    return Ranking(order, unjudged + [n for n in judged if not np.isfinite(skills[n])])


def rank_on_common(runs: Runs, preference: Sequence[str], min_points: int = 24) -> Ranking:
    """Rank by MAE on the origins every candidate shares (see the module doc)."""
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
            return Ranking(order, unjudged)
        fewest = min(len(runs[n]) for n in alive)
        if all(len(runs[n]) == fewest for n in alive):
            break  # nothing left to set aside: too little backtest for anyone
        unjudged += [n for n in alive if len(runs[n]) == fewest]
        alive = [n for n in alive if len(runs[n]) > fewest]
    return Ranking([], unjudged + alive)
