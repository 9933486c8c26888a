"""From backtested candidates to the ranked list the selector fits from (best first, fallbacks
after). Four rules, each against a way a short backtest misleads:

1. **Skill against the same days** (:func:`forecast.ranking.rank`): each candidate's errors
   over its own origins are divided by seasonal naive's on exactly those origins and steps, so
   a weekly model judged on one day is not compared with daily models' whole backtest.
2. **The week, when it is evident** (:func:`weekly_evident`): if last week predicts an hour,
   or the shape of a day, clearly better than yesterday does, models blind to the week go
   behind those that see it (they stay as fallbacks). On a real electricity series an ETS blind
   to the weekend won a one-day backtest and then missed the next three days by 13 % where
   seasonal naive 168 missed by 3 %.
3. **The best three and the seasonal naives, combined, always** (the M4 lesson): on a backtest
   of a few days the single best is often the luckiest. Over eleven real 14-day windows
   (electricity demand, LLM request and session counts, GPU demand) always combining the top
   three had the lowest mean and worst error against the better seasonal naive; picking the
   best single model was worse on both. Seasonal naive 24 and 168, where judged and not among
   the three, join as anchors: on bursty load the three best of a short backtest often share
   one bet (a flat level, say), and the copies of yesterday and last week hold the combination
   back from it (the worst of twelve real windows went from 1.105 to 1.063 x the better
   seasonal naive). The members are weighted by the inverse square of their backtest skill
   (Bates and Granger's inverse-variance weights, with skill standing in for the error's
   scale). The hour-by-hour median taken before let two members that copy last week (seasonal
   naive 168, and last week plus the smoothed gap) outvote the third, and its bands, built
   from its backtest errors, covered too much. On 67 real 14-day windows (the built-in ones and
   five US flight series, twelve windows each), in two halves of the flight windows, the
   weighted mean erred about as much (0.936 and 0.923 x the better seasonal naive, against the
   median's 0.921 and 0.929; its worst window 1.50 against 1.44), and its 80 % band met
   70-90 % on 97 and 92 % of the windows (median: 86 and 84 %), its 95 % band met 90-98 % on
   81 and 68 % (61 and 57 %). Weights of the inverse skill itself, or a weighted median, were
   worse on both halves.
4. **A week of history, not a day more**: no weekly model can be backtested yet. The forecast
   is the median of the day-type profile, last week's copy and the best judged (daily) model:
   the copy wins on regular weekly series (electricity), the profile on noisy ones, the daily
   model where the week means little; the median takes the middle one hour by hour. The best
   judged model's backtest stands in for its errors (flag ``weekly_unjudged``).
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


SHAPE_EVIDENT = 0.85  # last week's shape this much closer than yesterday's: the week is evident
SKILL_FLOOR = 1e-3  # a backtest without error weighs as one with a thousandth of seasonal naive's


@dataclass
class Choice:
    ranked: list[Forecaster]  # best first; every later one is a fallback
    runs: dict[str, list[OriginForecast]]  # backtest forecasts, combinations and stand-ins included
    scores: dict[str, Score] = field(default_factory=dict)  # every backtested candidate's
    flags: list[str] = field(default_factory=list)


def weekly_evident(y: F64, season: int, long_season: int) -> bool:
    """Whether last week predicts this hour clearly better than yesterday does (in-sample mean
    absolute seasonal differences over the same hours, under 0.9 x), or the shape of this day
    (:func:`shape_evident`)."""
    n = y.shape[0]
    if n < long_season + season:
        return False
    week = float(np.mean(np.abs(y[long_season:] - y[: n - long_season])))
    day = float(np.mean(np.abs(y[long_season:] - y[long_season - season : n - season])))
    return week < 0.9 * day or shape_evident(y, season, long_season)


def shape_evident(y: F64, season: int, long_season: int) -> bool:
    """Whether the same day last week predicts each day's *shape* -- its hours as shares of its
    total -- clearly better than the day before does (mean absolute differences of the shares,
    under ``SHAPE_EVIDENT`` x), days counted back from the end of ``y``.

    Why the shape as well as the amounts: with eight or nine days of history the amounts compare
    one or two days with last week. A storm, an incident or a holiday on one of them takes a
    sixth off its amounts, which makes last week look far and yesterday near; its shape keeps
    the weekday's. On the US flight network the week was judged not evident at the two origins
    after a storm Monday, and models blind to the weekend forecast the next three days: 1.33 x
    the better seasonal naive's error over that window, 1.09 with the week seen by its shape.
    Over 67 real windows, thresholds of 0.8-0.9 gained alike (mean 0.912 -> 0.907-0.909);
    under 0.75 nothing changed. A series without a weekly shape passes at 0.85 by chance in 1
    of 40 two-week histories, 6 of 40 at nine days (synthetic, 10 % noise); then the day-type
    profile and the weekly effects stand in for the daily models, which costs little where
    every weekday is alike."""
    if long_season % season:
        return False
    days, week = y.shape[0] // season, long_season // season
    if days <= week:
        return False
    blocks = y[y.shape[0] - days * season :].reshape(days, season)
    totals = blocks.sum(axis=1)
    shares = blocks / np.where(totals > 0, totals, 1.0)[:, None]
    now = slice(week, days)
    pairs = (totals[now] > 0) & (totals[:-week] > 0) & (totals[week - 1 : -1] > 0)
    if not pairs.any():
        return False
    to_week = np.abs(shares[now] - shares[:-week]).mean(axis=1)[pairs]
    to_day = np.abs(shares[now] - shares[week - 1 : -1]).mean(axis=1)[pairs]
    return float(to_week.mean()) < SHAPE_EVIDENT * float(to_day.mean())


def uses_week(model: Forecaster, long_season: int) -> bool:
    """A model that tells the weekdays apart, or whose forecast does not depend on which weekday
    comes next (its ``week_aware`` attribute says so where the name cannot)."""
    aware = getattr(model, "week_aware", None)
    if aware is not None:
        return bool(aware)
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
    ranking = rank(runs, [c.name for c in pool], reference=f"snaive{config.season}")
    ranked = [by_name[name] for _, name in ranking.order]
    long_m = config.long_season
    fallbacks = list(blind)
    if fallbacks:  # the week is evident: only models that see it compete
        names = {c.name for c in fallbacks}
        ranked = [c for c in ranked if c.name not in names]
        flags.append("weekly_evident")
    hedge = _week_unjudged(pool, ranked, long_m) if ranked and long_m is not None else None
    if hedge is not None:
        runs[hedge.name] = runs[ranked[0].name]
        ranked.insert(0, hedge)
        flags.append("weekly_unjudged")
    elif config.combine_top >= 2 and len(ranked) >= 2:
        members = with_anchors(ranked, config)
        skill = {name: value for value, name in ranking.order}
        weights = [1.0 / max(skill[c.name], SKILL_FLOOR) ** 2 for c in members]
        combo = Combination(members, "mean", weights)
        runs[combo.name] = combined_backtest([runs[c.name] for c in members], combo.how, weights)
        ranked.insert(0, combo)
    # Every backtest's score, the combination's included; a stand-in's errors are not its own.
    scores = {name: score(fs) for name, fs in runs.items() if hedge is None or name != hedge.name}
    return Choice(ranked + fallbacks, runs, scores, flags)


def with_anchors(ranked: Sequence[Forecaster], config: ChoiceConfig) -> list[Forecaster]:
    """Rule 3's members: the best ``combine_top`` and, where they are not among them but were
    judged, the seasonal naives of the day and the week (see the module doc)."""
    members = list(ranked[: config.combine_top])
    periods = [config.season] + ([config.long_season] if config.long_season is not None else [])
    for period in periods:
        anchor = next((c for c in ranked if c.name == f"snaive{period}"), None)
        if anchor is not None and anchor not in members:
            members.append(anchor)
    return members


def _week_unjudged(pool: Sequence[Forecaster], ranked: list[Forecaster], long_m: int) -> Combination | None:
    """Rule 4's median, when the history holds a week but no weekly model was judged yet."""
    if any(uses_week(c, long_m) for c in ranked):
        return None
    profile = next((c for c in pool if isinstance(c, DayTypeProfile)), None)
    copy = next((c for c in pool if c.name == f"snaive{long_m}"), None)
    if profile is None or copy is None:
        return None
    return Combination([profile, copy, ranked[0]], "median")
