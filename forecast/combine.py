"""Forecast combination and interval recalibration, both driven by the backtest.

**Combination.** On noisy, bursty series the average of a few good models beats the single
best one more often than not (the lesson of the M3/M4 competitions). :func:`combine` averages
the point forecasts and, level by level, the interval bounds (quantile averaging). The
selector offers the combination of the top backtested models as one more candidate, scored
on the very same backtest forecasts (no extra fits).

**Recalibration.** Model-based intervals assume the model is right; on real series they are
usually too narrow (a decomposition that absorbed noise into its seasonal pattern, bursts the
Gaussian errors do not know). :func:`calibration_factors` measures, on the backtest, by how
much each interval's half-widths must be scaled so that the share of actuals inside matches
its level (an empirical quantile of the error in units of the half-width, as in split
conformal prediction); :func:`recalibrate` applies it to the final forecast around its point
forecast. Factors are clamped to [0.5, 4] and need at least ``MIN_POINTS`` backtest points.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forecast.backtest import OriginForecast
from forecast.clean import BoolArray
from forecast.types import F64, Prediction

MIN_POINTS = 24
CLAMP = (0.5, 4.0)


def combine(preds: Sequence[Prediction]) -> Prediction:
    if not preds:
        raise ValueError("nothing to combine")
    levels = preds[0].lower.keys()
    return Prediction(
        np.mean([p.mean for p in preds], axis=0),
        {lv: np.mean([p.lower[lv] for p in preds], axis=0) for lv in levels},
        {lv: np.mean([p.upper[lv] for p in preds], axis=0) for lv in levels},
    )


def _units(actual: F64, pred: Prediction, level: int) -> F64:
    """|error| in units of the interval half-width on the error's side."""
    m = pred.mean
    above = actual >= m
    width = np.where(above, pred.upper[level] - m, m - pred.lower[level])
    err = np.abs(actual - m)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(width > 0, err / width, np.where(err > 0, np.inf, 0.0))
    return np.asarray(u, dtype=np.float64)


def calibration_factors(forecasts: Sequence[OriginForecast], levels: Sequence[int]) -> dict[int, float]:
    """Per level, the factor that makes the backtest coverage equal the level (1.0 if the
    backtest is too small or the intervals have zero width)."""
    out: dict[int, float] = {}
    for lv in levels:
        units = [_units(f.actual[f.mask], _masked(f.pred, f.mask), lv) for f in forecasts]
        u = np.concatenate(units) if units else np.empty(0)
        if u.size < MIN_POINTS or not np.isfinite(u).any():
            out[lv] = 1.0
            continue
        q = float(np.quantile(np.minimum(u, 1e6), lv / 100.0))  # inf (zero width) -> the clamp
        out[lv] = float(np.clip(q, *CLAMP))
    return out


def _masked(p: Prediction, mask: BoolArray) -> Prediction:
    return Prediction(
        p.mean[mask],
        {k: v[mask] for k, v in p.lower.items()},
        {k: v[mask] for k, v in p.upper.items()},
    )


def recalibrate(pred: Prediction, factors: dict[int, float]) -> Prediction:
    """Scale each level's half-widths around the point forecast; keep the levels nested and
    everything non-negative."""
    m = pred.mean
    lower = {lv: m - factors.get(lv, 1.0) * (m - lo) for lv, lo in pred.lower.items()}
    upper = {lv: m + factors.get(lv, 1.0) * (hi - m) for lv, hi in pred.upper.items()}
    levels = sorted(lower)
    for narrow, wide in zip(levels, levels[1:]):  # nesting: the 95 % band contains the 80 % band
        lower[wide] = np.minimum(lower[wide], lower[narrow])
        upper[wide] = np.maximum(upper[wide], upper[narrow])
    return Prediction(m, lower, upper).clipped(0.0)
