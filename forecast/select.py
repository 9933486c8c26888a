"""Choosing a model per series by rolling-origin backtest, with fallbacks; the library's entry
point :func:`forecast_series`.

1. :func:`forecast.clean.clean` the input (gaps, negatives, outages, leading gap).
2. Candidates that the history length allows (:func:`candidates`) are backtested at up to
   ``origins`` origins ``step`` apart counting back from the end; each forecasts up to the
   horizon or what is left of the history (:func:`_origins`). With the week evident, models
   blind to it are not backtested (:func:`forecast.choose.blind_to_week`). AIC is not used: it cannot
   compare across transforms or with the baselines, and it rewards in-sample fit, not the 72 h
   ahead we are judged on.
3. :func:`forecast.choose.choose` ranks them by skill against seasonal naive on the same
   origins, forecasts the skill-weighted mean of the best three and applies the rules that keep a short
   backtest from misleading.
4. The winner is refitted on the last ``window`` points and predicts ``horizon`` steps. If that
   fails or the optimiser does not converge, the next-ranked candidate is used (flag
   ``fallback``); the seasonal naive / naive forecasts are the last resort and cannot fail.
   Its intervals are built from its own backtest errors (:mod:`forecast.conformal`), with the
   out-of-sample coverage they achieved; too little backtest leaves the model's own intervals
   (flag ``intervals_from_model``).
5. Too short for a backtest (under two seasons, or no origin fits): seasonal naive if a full
   season exists, else naive (flag ``short_history``). A constant series gets the naive
   forecast with zero-width intervals (flag ``constant``). Nothing is ever printed: library
   warnings are in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from forecast._capture import captured
from forecast.arima import FourierSARIMAX
from forecast.backtest import OriginForecast, Score, rolling_origin, score
from forecast.baselines import (
    Clipped,
    Drift,
    LogScale,
    Naive,
    RecentMedian,
    SeasonalMean,
    SeasonalNaive,
    SeasonalNaiveSES,
)
from forecast.choose import blind_to_week, choose
from forecast.clean import clean
from forecast.conformal import bands, loo_coverage, origin_errors, scale_floor
from forecast.daytype import DayTypeProfile
from forecast.ets import ETS, Decomposed
from forecast.levelshape import RecentLevelShape
from forecast.twoway import HourWeekdayEffects
from forecast.types import F64, LEVELS, Fitted, Forecaster, Prediction


@dataclass(frozen=True)
class SelectConfig:
    """How models are chosen. Defaults are for hourly data; for daily data use
    ``SelectConfig(season=7, long_season=None, step=1)``."""

    season: int = 24  # the short seasonal period in steps (a day of hours)
    long_season: int | None = 168  # the long one (a week of hours); None disables
    long_season_min: int = 2 * 168 + 1  # the daily+weekly decomposition needs two weeks and an hour
    origins: int = 5  # backtest origins (the latest ones forecast what is left of the history)
    step: int = 24  # steps between origins
    window: int = 24 * 28  # fit on at most this many recent points (four weeks)
    use_sarimax: bool = False  # the Fourier-SARIMAX candidate (slower; off the default path)
    use_multiplicative: bool = False  # ETS(M,Ad,M) on strictly positive series (see candidates)
    combine_top: int = 3  # forecast the weighted mean of the best k backtested models (0 or 1: the best alone)
    conformal: bool = True  # intervals from the backtest's errors (forecast.conformal)
    seed: int = 0  # for simulated intervals of multiplicative models


@dataclass(frozen=True)
class SeriesForecast:
    prediction: Prediction  # ``horizon`` steps after the last input point, never negative
    model: str
    backtest: Score | None  # of the chosen model; None when no backtest was possible
    scores: dict[str, Score]  # every backtested candidate
    flags: tuple[str, ...]
    warnings: tuple[str, ...]
    observations: int  # observed (not filled) points in the history
    residuals: F64 = field(repr=False, default_factory=lambda: np.empty(0))
    coverage: dict[int, float] = field(default_factory=dict)  # out-of-sample coverage of the intervals, per level
    backtest_forecasts: list[OriginForecast] = field(default_factory=list, repr=False)  # the chosen model's
    offset: int = 0  # leading input steps trimmed: backtest origin o is input index o + offset
    error_floor: float = 0.0  # the conformal errors' least scale (forecast.conformal.scale_floor)

    @property
    def failed(self) -> bool:
        return self.model == "none"


def is_seasonal(y: F64, m: int) -> bool:
    """The autocorrelation test of seasonality at lag ``m`` (90 %, one-sided) that
    forecast::ets and statsforecast use to decide whether to try seasonal models."""
    n = y.shape[0]
    if m < 2 or n < 2 * m:
        return False
    yc = y - y.mean()
    denom = float(yc @ yc)
    if denom == 0:
        return False
    r = np.array([float(yc[k:] @ yc[: n - k]) / denom for k in range(1, m + 1)])
    limit = 1.645 * np.sqrt((1 + 2 * float(np.sum(r[:-1] ** 2))) / n)
    return bool(abs(r[-1]) > limit)


def candidates(y: F64, config: SelectConfig) -> list[Forecaster]:
    """The default candidate set for the history ``y``, simplest first.

    Seasonal ETS is tried only if :func:`is_seasonal` finds the daily season in the recent
    window, non-seasonal ETS only if it does not (both ways the backtest would reject the other
    kind; not fitting it saves a third of the time). The recent medians are the absolute-error
    forecast of bursty load: a day's and three days' only where the daily season is not found
    (on a daily cycle they won short backtest horizons and then flattened the next three days:
    BurstGPT's hourly tokens went from 0.88 to 1.12 x seasonal naive's error with them), a
    week's always (it is the week's level, whatever the hour). From two days, the recent daily
    level times the intraday shape (:mod:`forecast.levelshape`): it follows a step in the level
    of a bursty series from whole days, where the weekly models copy last week's. The weekly
    models join as soon as the history allows them: seasonal naive 168, the day-type profile
    and the hour-of-day x weekday effects from one week, seasonal naive with the smoothed gap a
    day later, the levelled weekly median and the daily+weekly decomposition from two weeks.
    ETS(M,Ad,M) is opt-in (``use_multiplicative``): it needs strictly positive data, its
    intervals are simulated, and ETS(A,Ad,A) on ``log(y + c)`` covers the same multiplicative
    shape.
    """
    n, m = y.shape[0], config.season
    seasonal = is_seasonal(y[-config.window :], m)
    out: list[Forecaster] = [Naive(), Drift()]
    if n >= m:
        out.append(SeasonalNaive(m))
        if not seasonal:
            out.append(RecentMedian(m))
    if n >= 2 * m:
        out.append(SeasonalMean(m))
        out.append(RecentLevelShape(m))
    if n >= 3 * m and not seasonal:
        out.append(RecentMedian(3 * m))
    if not seasonal:
        out.append(Clipped(ETS("add", "add", damped=True, seasonal=None)))
        out.append(LogScale(ETS("add", "add", damped=True, seasonal=None)))
    else:
        out.append(Clipped(ETS("add", "add", damped=True, seasonal="add", period=m)))
        out.append(LogScale(ETS("add", "add", damped=True, seasonal="add", period=m)))
        if config.use_multiplicative:
            out.append(Clipped(ETS("mul", "add", damped=True, seasonal="mul", period=m, seed=config.seed)))
    long_m = config.long_season
    if long_m is not None and n >= long_m:
        out.append(SeasonalNaive(long_m, guard=m if long_m % m == 0 else 0))
        out.append(RecentMedian(long_m, week=long_m))
        if n >= long_m + m:
            out.append(SeasonalNaiveSES(long_m, m, log=True))
        if long_m % m == 0:
            out.append(DayTypeProfile(m, long_m // m))
            out.append(HourWeekdayEffects(m, long_m // m))
        if n >= 2 * long_m:
            out.append(SeasonalMean(long_m, 4, levelled=True, median=True))
        decomposed = LogScale(Decomposed((m, long_m) if long_m % m else (long_m,)))
        if n >= max(config.long_season_min, decomposed.min_length):
            out.append(decomposed)
    if config.use_sarimax and n >= 2 * m:
        periods = (m,) if long_m is None or n < config.long_season_min else (m, long_m)
        out.append(LogScale(FourierSARIMAX(periods, tuple(3 for _ in periods))))
    return out


def _fallback_model(n: int, season: int) -> Forecaster:
    return SeasonalNaive(season) if n >= season else Naive()


def forecast_series(
    raw: npt.ArrayLike,
    horizon: int,
    config: SelectConfig = SelectConfig(),
    candidate_fn: Callable[[F64, SelectConfig], Sequence[Forecaster]] = candidates,
    levels: Sequence[int] = LEVELS,
) -> SeriesForecast:
    """Clean ``raw`` (one value per step, NaN for gaps), pick a model and forecast ``horizon``
    steps after its last point. Never raises for data reasons; look at ``flags``. Any warning
    raised on the way ends up in ``warnings``, none is printed."""
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1 step, got {horizon}")
    stray: list[str] = []
    with captured(stray):
        result = _forecast_series(raw, horizon, config, candidate_fn, levels)
    extra = tuple(w for w in stray if w not in result.warnings)
    return replace(result, warnings=result.warnings + extra) if extra else result


def _forecast_series(
    raw: npt.ArrayLike,
    horizon: int,
    config: SelectConfig,
    candidate_fn: Callable[[F64, SelectConfig], Sequence[Forecaster]],
    levels: Sequence[int],
) -> SeriesForecast:
    cleaned = clean(raw, config.season)
    flags = list(cleaned.flags)
    warnings: list[str] = []
    observations = int(cleaned.observed.sum())
    if cleaned.n == 0:
        return SeriesForecast(Prediction.nan(horizon, levels), "none", None, {}, tuple(flags), (), 0)
    y = cleaned.y
    window = y[-config.window :]
    if np.ptp(window) == 0:
        flags.append("constant")
        naive = Naive().fit(window)
        return SeriesForecast(
            naive.predict(horizon, levels).clipped(),
            "naive",
            None,
            {},
            tuple(flags),
            (),
            observations,
            naive.residuals,
            offset=cleaned.trimmed,
        )

    # -- backtest every candidate at the same origins -----------------------------------------
    n, m = y.shape[0], config.season
    pool = list(candidate_fn(y, config))
    origins = _origins(n, horizon, config, pool)
    runs: dict[str, list[OriginForecast]] = {}
    blind = blind_to_week(y, pool, config)
    for cand in pool if origins else []:
        if cand in blind:
            continue
        usable = [o for o in origins if o >= cand.min_length]
        if not usable:
            continue
        hb = min(horizon, n - usable[0])
        run = rolling_origin(cand, y, cleaned.observed, hb, usable, window=config.window, season=m)
        warnings.extend(run.failures)
        if run.failures or not run.forecasts:
            continue
        runs[cand.name] = run.forecasts
    choice = choose(y, pool, runs, config, blind)
    ranked, runs, scores = choice.ranked, choice.runs, choice.scores
    flags.extend(choice.flags)
    if not ranked:
        flags.append("short_history")
        ranked = [_fallback_model(n, m)]
    ranked.append(Naive())  # last resort; cannot fail

    # -- refit the best on the recent window; fall back down the ranking ---------------------
    for place, model in enumerate(ranked):
        try:
            fitted: Fitted = model.fit(window)
            pred = fitted.predict(horizon, levels)
        except Exception as exc:  # recorded and the next-ranked model is tried
            warnings.append(f"{model.name} final fit: {type(exc).__name__}: {exc}")
            continue
        warnings.extend(f"{model.name}: {w}" for w in fitted.info.warnings)
        if not fitted.info.converged:
            warnings.append(f"{model.name}: optimiser did not converge")
            if place < len(ranked) - 1:
                continue
        if place > 0:
            flags.append("fallback")
        backtest = runs.get(model.name, [])
        coverage: dict[int, float] = {}
        floor = scale_floor(window)
        errors = [origin_errors(f, floor) for f in backtest]
        b = bands(errors, horizon, levels) if config.conformal else None
        if b is not None:
            pred = b.apply(pred.mean, floor)
            coverage = loo_coverage(errors, levels)
        else:  # too little backtest for empirical intervals: the model's own, flagged
            flags.append("intervals_from_model")
        return SeriesForecast(
            pred.clipped(),
            model.name,
            score(backtest) if backtest else None,
            scores,
            tuple(flags),
            tuple(dict.fromkeys(warnings)),
            observations,
            fitted.residuals,
            coverage,
            backtest,
            cleaned.trimmed,
            floor,
        )
    raise AssertionError("unreachable: the naive forecast cannot fail on a non-empty series")


def _origins(n: int, horizon: int, config: SelectConfig, pool: Sequence[Forecaster]) -> list[int]:
    """Backtest origins ``step`` apart counting back from the end of the history, oldest first.
    The latest ones forecast less than the horizon (what is left of the history): more origins
    for the interval errors and for weekly models on a short history. Each origin keeps at
    least two seasons of training, or what the simplest candidate needs; under two seasons of
    history there is no backtest at all."""
    m = config.season
    if n < 2 * m or not pool:
        return []
    min_train = max(2, min(c.min_length for c in pool), 2 * m)
    # On a short history the origins close in (never under a quarter season apart), so that
    # the selection still rests on several forecasts.
    step = max(1, m // 4, min(config.step, (n - min_train) // max(1, config.origins)))
    out = [n - k * step for k in range(1, config.origins + 1)]
    return sorted(o for o in out if o >= min_train and n - o >= 1)
