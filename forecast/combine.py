"""Forecast combination: on noisy, bursty series the average or median of a few good models
beats the single best one more often than not (the lesson of the M3/M4 competitions). The
selector combines its top backtested models -- weighted by backtest skill
(:mod:`forecast.choose`), or by the median where there is no skill to weigh by -- scored on the
very same backtest forecasts (no extra fits). Intervals are not taken from here in the end:
:mod:`forecast.conformal` builds them from the chosen method's backtest errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from forecast.backtest import OriginForecast
from forecast.types import F64, LEVELS, FitInfo, Fitted, Forecaster, Prediction


def combine(preds: Sequence[Prediction], how: str = "mean", weights: Sequence[float] | None = None) -> Prediction:
    """Average (``how="mean"``, with ``weights`` if given) or take the median (``"median"``) of
    the point forecasts and, level by level, of the interval bounds (quantile averaging)."""
    if not preds:
        raise ValueError("nothing to combine")
    f = _reducer(how, weights, len(preds))
    levels = preds[0].lower.keys()
    return Prediction(
        f([p.mean for p in preds]),
        {lv: f([p.lower[lv] for p in preds]) for lv in levels},
        {lv: f([p.upper[lv] for p in preds]) for lv in levels},
    )


def _reducer(how: str, weights: Sequence[float] | None, n: int) -> Callable[[list[F64]], F64]:
    if how not in ("mean", "median"):
        raise ValueError(f"unknown combination {how!r}: mean or median")
    if weights is None:
        reduce = np.mean if how == "mean" else np.median
        return lambda arrays: np.asarray(reduce(arrays, axis=0), dtype=np.float64)
    if how != "mean" or len(weights) != n or not all(np.isfinite(w) and w > 0 for w in weights):
        raise ValueError(f"weights need a mean and one positive weight a forecast, got {list(weights)}")
    w = np.asarray(weights, np.float64) / float(np.sum(weights))
    return lambda arrays: np.asarray(np.tensordot(w, np.asarray(arrays, np.float64), axes=1), dtype=np.float64)


class Combination:
    """The mean, weighted mean (``weights``, one per member; named ``wmean``) or median forecast
    of several models (see :mod:`forecast.combine`)."""

    def __init__(self, members: Sequence[Forecaster], how: str = "mean", weights: Sequence[float] | None = None) -> None:
        self.members = list(members)
        self.how = how
        self.weights = None if weights is None else [float(w) for w in weights]
        kind = "wmean" if self.weights is not None else how
        self.name = f"{kind}(" + "+".join(sorted(m.name for m in self.members)) + ")"
        self.min_length = max(m.min_length for m in self.members)

    def fit(self, y: F64) -> Fitted:
        return _CombinedFit([m.fit(y) for m in self.members], self.how, self.weights)


class _CombinedFit:
    def __init__(self, fits: list[Fitted], how: str, weights: list[float] | None = None) -> None:
        self.fits, self.how, self.weights = fits, how, weights
        self.info = FitInfo(
            converged=all(f.info.converged for f in fits), warnings=[w for f in fits for w in f.info.warnings]
        )
        stacked = np.array([f.residuals for f in fits], dtype=np.float64)
        counts = np.isfinite(stacked).sum(axis=0)
        total = np.nansum(stacked, axis=0)
        self.residuals = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)

    def predict(self, h: int, levels: Sequence[int] = LEVELS) -> Prediction:
        return combine([f.predict(h, levels) for f in self.fits], self.how, self.weights)


def combined_backtest(
    runs: list[list[OriginForecast]], how: str, weights: Sequence[float] | None = None
) -> list[OriginForecast]:
    """The combination's backtest forecasts, from its members' at the origins they share."""
    by_origin = [{f.origin: f for f in run} for run in runs]
    shared = sorted(set.intersection(*(set(b) for b in by_origin)))
    out = []
    for o in shared:
        fs = [b[o] for b in by_origin]
        out.append(OriginForecast(o, fs[0].actual, fs[0].mask, combine([f.pred for f in fs], how, weights), fs[0].scale))
    return out
