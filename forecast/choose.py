"""From backtested candidates to the ranked list the selector fits from (best first, fallbacks
after). Four rules, each against a way a short backtest misleads:

1. **Same origins** (:func:`forecast.ranking.rank`): candidates are compared where all of them
   forecast.
2. **The week, when it is evident** (:func:`weekly_evident`): if last week predicts an hour
   clearly better than yesterday does, models blind to the week go behind those that see it
   (they stay as fallbacks). On a real electricity series an ETS blind to the weekend won a
   one-day backtest and then missed the next three days by 13 % where seasonal naive 168 missed
   by 3 %.
3. **Combinations first** (the M4 lesson): the median and the mean of the top three are offered,
   and a single model is chosen over the best of them only if it beats it by more than
   ``combo_margin`` -- on a short backtest the single best is often the luckiest.
4. **A week of history, not a day more**: no weekly model can be backtested yet, so the day-type
   profile (the daily seasonal mean when the week shows no pattern) leads, with the best judged
   model's errors standing in for its own (flag ``weekly_unjudged``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from forecast.backtest import OriginForecast, Score, score
from forecast.combine import Combination, combined_backtest
from forecast.daytype import DayTypeProfile
from forecast.ranking import rank
from forecast.types import F64, Forecaster


class ChoiceConfig(Protocol):
    @property
    def season(self) -> int: ...

    @property
    def long_season(self) -> int | None: ...

    @property
    def combine_top(self) -> int: ...

    @property
    def combo_margin(self) -> float: ...


@dataclass
class Choice:
    ranked: list[Forecaster]  # best first; every later one is a fallback
    runs: dict[str, list[OriginForecast]]  # backtest forecasts, combinations and stand-ins included
    scores: dict[str, Score] = field(default_factory=dict)  # every backtested candidate's
    flags: list[str] = field(default_factory=list)


def weekly_evident(y: F64, season: int, long_season: int) -> bool:
    """Whether last week predicts this hour clearly better than yesterday does (in-sample mean
    absolute seasonal differences over the same hours, under 0.9 x)."""
    n = y.shape[0]
    if n < long_season + season:
        return False
    week = float(np.mean(np.abs(y[long_season:] - y[: n - long_season])))
    day = float(np.mean(np.abs(y[long_season:] - y[long_season - season : n - season])))
    return week < 0.9 * day


def uses_week(model: Forecaster, long_season: int) -> bool:
    return isinstance(model, DayTypeProfile) or str(long_season) in model.name


def blind_to_week(y: F64, pool: Sequence[Forecaster], config: ChoiceConfig) -> list[Forecaster]:
    """With the week evident, the candidates blind to it, in pool order (empty otherwise). They
    can only be fallbacks, so they are not worth backtesting (about half the fitting time on
    weekly series: both daily ETS go)."""
    long_m = config.long_season
    if long_m is None or not weekly_evident(y, config.season, long_m):
        return []
    return [c for c in pool if not uses_week(c, long_m)]


def choose(
    y: F64,
    pool: Sequence[Forecaster],
    runs: dict[str, list[OriginForecast]],
    config: ChoiceConfig,
    blind: Sequence[Forecaster] = (),
) -> Choice:
    """``blind``: what :func:`blind_to_week` gave for this history (not backtested)."""
    runs = dict(runs)
    by_name: dict[str, Forecaster] = {c.name: c for c in pool}
    flags: list[str] = []
    ranking = rank(runs, [c.name for c in pool])
    ranked = [by_name[name] for _, name in ranking.order]
    long_m = config.long_season
    fallbacks = list(blind)
    if fallbacks:  # the week is evident: only models that see it compete
        names = {c.name for c in fallbacks}
        ranked = [c for c in ranked if c.name not in names]
        flags.append("weekly_evident")
    if config.combine_top >= 2 and len(ranked) >= 2:
        ranked = _with_combinations(ranked, runs, by_name, config)
    scores = {name: score(fs) for name, fs in runs.items()}
    if long_m is not None and y.shape[0] >= 2 * long_m and len(ranked) > 1 and ranked[0].name == f"snaive{long_m}":
        # One week's copy carries that week's accidents (a holiday, an outage) into the forecast,
        # and the backtest cannot see the one that lies exactly a week before the forecast;
        # from two weeks on it is used inside a combination, not alone.
        ranked = ranked[1:2] + ranked[:1] + ranked[2:]
        flags.append("snaive_week_demoted")
    ranked += fallbacks
    if ranked and long_m is not None:
        judged = {name for _, name in ranking.order}
        unjudged = [c for c in pool if isinstance(c, DayTypeProfile) and c.name not in judged]
        if unjudged and ranked[0].min_length < long_m:
            runs[unjudged[0].name] = runs[ranked[0].name]
            ranked.insert(0, unjudged[0])
            flags.append("weekly_unjudged")
    return Choice(ranked, runs, scores, flags)


def _with_combinations(
    ranked: list[Forecaster],
    runs: dict[str, list[OriginForecast]],
    by_name: dict[str, Forecaster],
    config: ChoiceConfig,
) -> list[Forecaster]:
    members = ranked[: config.combine_top]
    combos = [Combination(members, how) for how in ("median", "mean")[: 2 if len(members) >= 3 else 1]]
    for combo in combos:
        runs[combo.name] = combined_backtest([runs[c.name] for c in members], combo.how)
        by_name[combo.name] = combo
    preference = [ranked[0].name] + [c.name for c in combos] + [c.name for c in ranked[1:]]
    final = rank({k: runs[k] for k in preference}, preference).order
    names = {c.name for c in combos}
    best_combo = next((item for item in final if item[1] in names), None)
    if best_combo is not None and final[0][1] not in names and best_combo[0] <= (1 + config.combo_margin) * final[0][0]:
        final = [best_combo] + [item for item in final if item is not best_combo]
    return [by_name[name] for _, name in final]
