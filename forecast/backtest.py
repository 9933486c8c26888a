"""Rolling-origin backtests and the accuracy measures they report.

At each origin ``o`` the model is fitted to the history before ``o`` only (at most ``window``
points) and its ``h``-step forecast is compared with what followed. Only hours that were really
observed count (filled gaps are not scored). Measures, pooled over all origins:

* ``wape``  -- sum |error| / sum |actual| (weighted absolute percentage error); NaN when the
  actuals are all zero;
* ``mase``  -- mean over origins of MAE / in-sample MAE of the seasonal naive forecast on the
  training part (Hyndman & Koehler 2006); < 1 beats seasonal naive on average;
* ``coverage80`` / ``coverage95`` -- share of actuals inside the 80 % / 95 % intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from forecast.clean import BoolArray
from forecast.types import F64, Forecaster, Prediction


@dataclass(frozen=True)
class Score:
    mae: float
    wape: float
    mase: float
    coverage80: float
    coverage95: float
    points: int
    origins: int

    def as_dict(self) -> dict[str, float | int]:
        return {
            "mae": self.mae,
            "wape": self.wape,
            "mase": self.mase,
            "coverage80": self.coverage80,
            "coverage95": self.coverage95,
            "points": self.points,
            "origins": self.origins,
        }


def seasonal_scale(y: F64, season: int) -> float:
    """In-sample MAE of the seasonal naive (naive when too short) forecast; the MASE scale."""
    m = season if y.shape[0] > season else 1
    if y.shape[0] <= m:
        return float("nan")
    return float(np.mean(np.abs(y[m:] - y[:-m])))


@dataclass
class Accumulator:
    """Pools errors of many forecasts of one model."""

    abs_err: float = 0.0
    abs_actual: float = 0.0
    points: int = 0
    inside80: int = 0
    inside95: int = 0
    origins: int = 0
    mase_sum: float = 0.0
    mase_n: int = 0

    def add(self, actual: F64, pred: Prediction, mask: BoolArray, scale: float) -> None:
        a, m = actual[mask], pred.mean[mask]
        if a.size == 0:
            return
        err = np.abs(a - m)
        self.abs_err += float(err.sum())
        self.abs_actual += float(np.abs(a).sum())
        self.points += int(a.size)
        self.origins += 1
        if 80 in pred.lower:
            self.inside80 += int(((a >= pred.lower[80][mask]) & (a <= pred.upper[80][mask])).sum())
        if 95 in pred.lower:
            self.inside95 += int(((a >= pred.lower[95][mask]) & (a <= pred.upper[95][mask])).sum())
        if np.isfinite(scale) and scale > 0:
            self.mase_sum += float(err.mean()) / scale
            self.mase_n += 1

    def score(self) -> Score:
        nan = float("nan")
        p = self.points
        return Score(
            mae=self.abs_err / p if p else nan,
            wape=self.abs_err / self.abs_actual if self.abs_actual > 0 else nan,
            mase=self.mase_sum / self.mase_n if self.mase_n else nan,
            coverage80=self.inside80 / p if p else nan,
            coverage95=self.inside95 / p if p else nan,
            points=p,
            origins=self.origins,
        )


@dataclass(frozen=True)
class OriginForecast:
    """One backtest forecast: what followed ``origin``, which of it was observed, the forecast
    (clipped at zero) and the MASE scale of the training part."""

    origin: int
    actual: F64
    mask: BoolArray
    pred: Prediction
    scale: float


def score(forecasts: Sequence[OriginForecast]) -> Score:
    acc = Accumulator()
    for f in forecasts:
        acc.add(f.actual, f.pred, f.mask, f.scale)
    return acc.score()


@dataclass(frozen=True)
class BacktestRun:
    forecasts: list[OriginForecast]
    failures: list[str]
    nonconverged: int

    @property
    def score(self) -> Score:
        return score(self.forecasts)


def rolling_origin(
    forecaster: Forecaster,
    y: F64,
    observed: BoolArray,
    h: int,
    origins: Sequence[int],
    *,
    window: int,
    season: int,
) -> BacktestRun:
    """Refit ``forecaster`` at each origin and keep its ``h``-step forecasts.

    A fit or prediction that raises is recorded in ``failures`` (as text) and skipped; the
    caller decides whether a candidate with failures may be chosen.
    """
    out: list[OriginForecast] = []
    failures: list[str] = []
    nonconverged = 0
    for o in origins:
        train = y[max(0, o - window) : o]
        end = min(o + h, y.shape[0])
        try:
            fitted = forecaster.fit(train)
            pred = fitted.predict(end - o)
        except Exception as exc:  # a failed fit is data: recorded, the candidate is marked
            failures.append(f"{forecaster.name} at origin {o}: {type(exc).__name__}: {exc}")
            continue
        if not fitted.info.converged:
            nonconverged += 1
        out.append(
            OriginForecast(o, y[o:end], observed[o:end], pred.clipped(0.0), seasonal_scale(train, season))
        )
    return BacktestRun(out, failures, nonconverged)
