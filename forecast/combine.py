"""Forecast combination: on noisy, bursty series the average or median of a few good models
beats the single best one more often than not (the lesson of the M3/M4 competitions). The
selector offers the median and the mean of its top backtested models as candidates, scored on
the very same backtest forecasts (no extra fits). Intervals are not taken from here in the
end: :mod:`forecast.conformal` builds them from the chosen method's backtest errors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forecast.backtest import OriginForecast
from forecast.types import F64, LEVELS, FitInfo, Fitted, Forecaster, Prediction


def combine(preds: Sequence[Prediction], how: str = "mean") -> Prediction:
    """Average (``how="mean"``) or take the median (``"median"``) of the point forecasts and,
    level by level, of the interval bounds (quantile averaging)."""
    if not preds:
        raise ValueError("nothing to combine")
    if how not in ("mean", "median"):
        raise ValueError(f"unknown combination {how!r}: mean or median")
    f = np.mean if how == "mean" else np.median
    levels = preds[0].lower.keys()
    return Prediction(
        np.asarray(f([p.mean for p in preds], axis=0), dtype=np.float64),
        {lv: np.asarray(f([p.lower[lv] for p in preds], axis=0), dtype=np.float64) for lv in levels},
        {lv: np.asarray(f([p.upper[lv] for p in preds], axis=0), dtype=np.float64) for lv in levels},
    )


class Combination:
    """The mean or median forecast of several models (see :mod:`forecast.combine`)."""

    def __init__(self, members: Sequence[Forecaster], how: str = "mean") -> None:
        self.members = list(members)
        self.how = how
        self.name = f"{how}(" + "+".join(sorted(m.name for m in self.members)) + ")"
        self.min_length = max(m.min_length for m in self.members)

    def fit(self, y: F64) -> Fitted:
        return _CombinedFit([m.fit(y) for m in self.members], self.how)


class _CombinedFit:
    def __init__(self, fits: list[Fitted], how: str) -> None:
        self.fits, self.how = fits, how
        self.info = FitInfo(
            converged=all(f.info.converged for f in fits), warnings=[w for f in fits for w in f.info.warnings]
        )
        stacked = np.array([f.residuals for f in fits], dtype=np.float64)
        counts = np.isfinite(stacked).sum(axis=0)
        total = np.nansum(stacked, axis=0)
        self.residuals = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)

    def predict(self, h: int, levels: Sequence[int] = LEVELS) -> Prediction:
        return combine([f.predict(h, levels) for f in self.fits], self.how)


def combined_backtest(runs: list[list[OriginForecast]], how: str) -> list[OriginForecast]:
    """The combination's backtest forecasts, from its members' at the origins they share."""
    by_origin = [{f.origin: f for f in run} for run in runs]
    shared = sorted(set.intersection(*(set(b) for b in by_origin)))
    out = []
    for o in shared:
        fs = [b[o] for b in by_origin]
        out.append(OriginForecast(o, fs[0].actual, fs[0].mask, combine([f.pred for f in fs], how), fs[0].scale))
    return out
