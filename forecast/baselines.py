"""Baselines and fallbacks: naive, seasonal naive (plain, and with the smoothed gap to last
season), seasonal mean, recent median, drift; the log-scale wrapper.

Intervals are the textbook ones (Hyndman & Athanasopoulos, *FPP3* §5.5) with ``sigma`` the
root mean square of the in-sample one-step residuals: naive ``sigma*sqrt(h)``, seasonal naive
``sigma*sqrt(floor((h-1)/m)+1)``, drift ``sigma*sqrt(h*(1+h/T))``; the seasonal mean uses the spread of its own in-sample errors. No library call can fail
here, which is what makes these the fallbacks of last resort.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from forecast.clean import Transform, regular
from forecast.types import F64, LEVELS, FitError, FitInfo, Fitted, Forecaster, Prediction


def seasonal_residuals(y: F64, lag: int) -> F64:
    """In-sample errors of copying the value ``lag`` steps back (NaN where there is none)."""
    resid = np.full(y.shape[0], np.nan)
    resid[lag:] = y[lag:] - y[:-lag]
    return resid


def rms(residuals: F64) -> float:
    r = residuals[np.isfinite(residuals)]
    return float(np.sqrt(np.mean(r * r))) if r.size else 0.0


@dataclass(frozen=True)
class PathFit:
    mean: F64
    sd: F64
    residuals: F64
    info: FitInfo = field(default_factory=FitInfo)

    def predict(self, h: int, levels: Sequence[int] = LEVELS) -> Prediction:
        if h > self.mean.shape[0]:
            raise ValueError(f"fitted for {self.mean.shape[0]} steps, asked for {h}")
        return Prediction.gaussian(self.mean[:h], self.sd[:h], levels)


class Baseline:
    """Baselines precompute a long path at fit time (cheap) and slice it in ``predict``."""

    name = "baseline"
    min_length = 1
    max_h = 24 * 31

    def _require(self, y: F64) -> F64:
        y = regular(y)
        if y.shape[0] < self.min_length:
            raise FitError(f"{self.name}: needs {self.min_length} points, got {y.shape[0]}")
        return y


class Naive(Baseline):
    name = "naive"
    min_length = 1

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        resid = np.concatenate([[np.nan], np.diff(y)])
        steps = np.arange(1, self.max_h + 1, dtype=np.float64)
        return PathFit(np.full(self.max_h, y[-1]), rms(resid) * np.sqrt(steps), resid)


class SeasonalNaive(Baseline):
    """The last season again. With ``guard`` (a season of several sub-periods, e.g. a week of
    days) and two earlier seasons in view, a sub-period of the last season that is far from the
    same sub-period in the earlier seasons -- a holiday, an outage, a burst -- is replaced by
    their median before it is copied: the backtest can never see the accident that lies exactly
    one season before the forecast."""

    def __init__(self, period: int, guard: int = 0) -> None:
        self.period, self.guard = period, guard
        self.name = f"snaive{period}"
        self.min_length = period

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        m = self.period
        resid = seasonal_residuals(y, m)
        last = y[-m:]
        if self.guard and y.shape[0] >= 3 * m:
            last = _guarded(y, m, self.guard)
        steps = np.arange(self.max_h)
        mean = last[steps % m]
        sd = rms(resid) * np.sqrt(steps // m + 1.0)
        return PathFit(mean, sd, resid)


class SeasonalNaiveSES(Baseline):
    """Last season again plus the smoothed recent gap to it: simple exponential smoothing of the
    seasonal differences ``d_t = y_t - y_(t-period)`` (the smoothing weight chosen on a grid by
    one-step squared error), added to the last season -- ARIMA(0,1,1)(0,1,0) in effect. On a
    stable week the gap smooths to about zero and this is seasonal naive; after a level shift
    (a tenant gone since Wednesday, a warm spell) the gap carries the new level forward.

    With ``log`` (the selector's choice) the gaps are taken on ``log(y + c)`` (``c`` a
    twentieth of the mean, :meth:`forecast.clean.Transform.log_for`), where the gap is a ratio
    that follows a load x 1.8 at every hour of the day; a plain ratio of this week to last,
    without the offset, exploded on a real session-count series with idle hours (20x the error
    of seasonal naive). Each gap then counts in proportion to the load it rests on (the mean of
    its two values over the series' mean, at most 1): an idle hour's 0 against last week's 1 is
    a log gap of -1 that says nothing about the load. Smoothed unweighted, the night hours at
    the end of a history set the gap: on real hourly departures of an airport, forecast from
    midnight, that halved the next day (WAPE 0.54 against seasonal naive's 0.17)."""

    alphas = np.linspace(0.02, 0.6, 30)

    def __init__(self, period: int, sub: int, *, log: bool = False) -> None:
        self.period, self.sub, self.log = period, sub, log
        self.name = f"snaive{period}_ses" + ("[log]" if log else "")
        self.min_length = period + sub  # a sub-period (a day) of gaps to smooth

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        m, n = self.period, y.shape[0]
        transform = Transform.log_for(y) if self.log else Transform()
        z = transform.forward(y)
        d = z[m:] - z[:-m]
        weight = _load_weights(y, m) if self.log else np.ones(d.shape[0])
        gap, one_step = _smoothed_gap(d, weight, self.alphas)
        resid = np.full(n, np.nan)
        resid[m + 1 :] = y[m + 1 :] - transform.inverse(z[1 : n - m] + one_step)
        # Last season with its accidents (a holiday) replaced, as seasonal naive's guard does.
        last = _guarded(z, m, self.sub) if n >= 3 * m and m % self.sub == 0 else z[n - m :]
        steps = np.arange(self.max_h)
        mean = transform.inverse(last[steps % m] + self._moves(d, weight, n, gap, steps))
        return PathFit(mean, rms(resid) * np.sqrt(steps // m + 1.0), resid)

    def _moves(self, d: F64, weight: F64, n: int, gap: float, steps: npt.NDArray[np.int64]) -> F64:
        """The gap to add to each copied step: less what the copied step already holds. A
        copied hour from after a level change was already at the new level; adding the gap to
        it too counted the change twice (a week after a tenant moved in, the forecast was 1.8 x
        the new level). What a copied step holds is the (weighted) mean gap over the sub-period
        (a day) up to it, kept between zero and the mean gap now; where the history is too short
        to say (a copy less than a season and a sub-period in), the whole gap is added, as
        before."""
        m, k = self.period, self.sub
        held = np.full(n, np.nan)  # held[t]: mean of the gaps d over the k steps up to t
        if d.shape[0] >= k:
            sums = np.concatenate([[0.0], np.cumsum(weight * d)])
            weights = np.concatenate([[0.0], np.cumsum(weight)])
            total = weights[k:] - weights[:-k]
            held[m + k - 1 :] = np.where(total > 0, (sums[k:] - sums[:-k]) / np.maximum(total, 1e-300), 0.0)
        now = held[n - 1] if np.isfinite(held[n - 1]) else gap
        copied = held[n - m + steps % m]
        kept = np.clip(np.nan_to_num(copied), min(0.0, now), max(0.0, now))
        return np.asarray(gap - np.where(np.isfinite(copied), kept, 0.0), dtype=np.float64)


def _load_weights(y: F64, m: int) -> F64:
    """Per seasonal gap ``y_t - y_(t-m)``: the mean of its two values over the series' mean
    load, at most 1 (see :class:`SeasonalNaiveSES`)."""
    load = np.maximum(y, 0.0)
    mean = float(np.mean(load))
    if mean <= 0:
        return np.ones(y.shape[0] - m)
    return np.asarray(np.minimum(1.0, (load[m:] + load[:-m]) / (2.0 * mean)), dtype=np.float64)


def _smoothed_gap(d: F64, weight: F64, alphas: F64) -> tuple[float, F64]:
    """Weighted simple exponential smoothing of ``d`` from ``level_0 = d_0``: ``level_t =
    level_(t-1) + alpha w_t (d_t - level_(t-1))``, the weight ``alpha`` of least weighted
    one-step squared error (all of them in one pass). Returns the last level and the chosen
    weight's one-step forecasts of ``d_1 ..``."""
    levels = np.empty((d.shape[0], alphas.shape[0]))  # levels[t]: every alpha's level after d_t
    levels[0] = d[0]
    sse = np.zeros(alphas.shape[0])
    for t in range(1, d.shape[0]):
        error = d[t] - levels[t - 1]
        sse += weight[t] * error * error
        levels[t] = levels[t - 1] + alphas * (weight[t] * error)
    best = int(np.argmin(sse))
    return float(levels[-1, best]), np.asarray(levels[:-1, best], dtype=np.float64)


class RecentMedian(Baseline):
    """The median of the last ``window`` steps, flat. Bursty service load (a day of 233 k
    sessions between days of 2 k) is scored by absolute error, which the median minimises: the
    mean-seeking models chase each burst into the next three days. Over a whole week
    (``window`` a multiple of it) the median does not depend on which weekday comes next, so
    it counts as seeing the week (``week_aware``)."""

    def __init__(self, window: int, week: int = 168) -> None:
        self.window = window
        self.name = f"median{window}"
        self.min_length = window
        self.week_aware = window % week == 0

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        recent = y[-self.window :]
        centre = float(np.median(recent))
        resid = np.full(y.shape[0], np.nan)
        resid[-self.window :] = recent - centre
        return PathFit(np.full(self.max_h, centre), np.full(self.max_h, rms(resid)), resid)


def _guarded(y: F64, m: int, sub: int) -> F64:
    """The last season of ``y`` with accidental sub-periods replaced (see SeasonalNaive)."""
    k = min(4, y.shape[0] // m)
    seasons = y[y.shape[0] - k * m :].reshape(k, m // sub, sub)  # season x sub-period x step
    last, earlier = seasons[-1], seasons[:-1]
    reference = np.median(earlier, axis=0)
    scale = np.maximum(np.abs(reference).mean(axis=1), 1e-12)

    def far(a: F64, b: F64) -> F64:
        return np.asarray(np.abs(a - b).mean(axis=-1) / scale, dtype=np.float64)

    typical = float(np.median(far(earlier, reference)))  # how far an ordinary sub-period strays
    accident = far(last, reference) > 3.0 * typical + 0.05
    if 2 * int(accident.sum()) > accident.size:
        # Most of the season strays: the load moved (a tenant came or went), an accident is a
        # day or two. The earlier seasons' median would copy the old level forward.
        return np.asarray(last.reshape(-1), dtype=np.float64)
    out = last.copy()
    out[accident] = reference[accident]
    return np.asarray(out.reshape(-1), dtype=np.float64)


class SeasonalMean(Baseline):
    """Each phase of the season forecast by its mean over the last ``cycles`` seasons: seasonal
    naive with the noise of a single (possibly bursty) day averaged out."""

    def __init__(self, period: int, cycles: int = 7, levelled: bool = False, median: bool = False) -> None:
        self.period, self.cycles, self.levelled, self.median = period, cycles, levelled, median
        self.name = f"{'smedian' if median else 'smean'}{period}x{cycles}" + ("_level" if levelled else "")
        self.min_length = 2 * period

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        m = self.period
        c = min(self.cycles, y.shape[0] // m)
        seasons = y[-c * m :].reshape(c, m)
        if self.levelled:
            # Each past season's shape at its own level, then at the last season's level: a
            # step in the level two weeks ago does not drag the average back to the old level.
            level = seasons.mean(axis=1)
            if np.all(level > 0):
                seasons = seasons / level[:, None] * level[-1]
        # The median of three or more seasons leaves out one season's accident (a holiday).
        profile = np.median(seasons, axis=0) if self.median and c >= 3 else seasons.mean(axis=0)
        resid = np.full(y.shape[0], np.nan)
        if y.shape[0] > c * m:
            past = np.mean([y[c * m - j * m : y.shape[0] - j * m] for j in range(1, c + 1)], axis=0)
            resid[c * m :] = y[c * m :] - past
        steps = np.arange(self.max_h)
        return PathFit(profile[steps % m], np.full(self.max_h, rms(resid)), resid)


class Drift(Baseline):
    name = "drift"
    min_length = 2

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        n = y.shape[0]
        slope = (y[-1] - y[0]) / (n - 1)
        resid = np.concatenate([[np.nan], np.diff(y) - slope])
        steps = np.arange(1, self.max_h + 1, dtype=np.float64)
        sd = rms(resid) * np.sqrt(steps * (1.0 + steps / n))
        return PathFit(y[-1] + slope * steps, sd, resid)


class LinearTrend(Baseline):
    """Least-squares line over the last ``window`` points, extrapolated (Prometheus's
    ``predict_linear``); a comparison point for benchmarks, not a candidate."""

    def __init__(self, window: int = 6) -> None:
        self.window = window
        self.name = f"linear{window}"
        self.min_length = 2

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        tail = y[-self.window :]
        x = np.arange(tail.shape[0], dtype=np.float64)
        slope, intercept = np.polyfit(x, tail, 1)
        resid = tail - (intercept + slope * x)
        steps = np.arange(1, self.max_h + 1, dtype=np.float64)
        mean = intercept + slope * (x[-1] + steps)
        return PathFit(mean, rms(resid) * np.sqrt(steps), resid)


@dataclass(frozen=True)
class _TransformedFit:
    inner: Fitted
    transform: Transform

    @property
    def info(self) -> FitInfo:
        return self.inner.info

    @property
    def residuals(self) -> F64:
        return self.inner.residuals

    def predict(self, h: int, levels: Sequence[int] = LEVELS) -> Prediction:
        return self.transform.inverse_prediction(self.inner.predict(h, levels))


class LogScale:
    """Fit ``inner`` on ``log(y + c)`` (see :class:`forecast.clean.Transform`)."""

    def __init__(self, inner: Forecaster, fraction: float = 0.05) -> None:
        self.inner = inner
        self.fraction = fraction

    @property
    def name(self) -> str:
        return f"{self.inner.name}[log]"

    @property
    def min_length(self) -> int:
        return self.inner.min_length

    def fit(self, y: F64) -> Fitted:
        y = regular(y)
        transform = Transform.log_for(y, self.fraction)
        return _TransformedFit(self.inner.fit(transform.forward(y)), transform)


class Clipped:
    """Any forecaster with its prediction clipped at zero (raw-scale models of spend/tokens)."""

    def __init__(self, inner: Forecaster) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def min_length(self) -> int:
        return self.inner.min_length

    def fit(self, y: F64) -> Fitted:
        return _TransformedFit(self.inner.fit(y), Transform())
