"""Cost per 1M tokens as the ratio of the spend and token forecasts.

**Point forecast.** ``spend / tokens x 1e6`` of the two point forecasts, hour by hour, so the
three series always agree (spend = unit cost x tokens). Where the token forecast is zero the
ratio is undefined (NaN, flag ``ratio_undefined``).

**Intervals, by simulation.** Each hour's predictive distribution of spend and of tokens is
represented by its quantile function through the five points we have (2.5 %, 10 %, median,
90 %, 97.5 %), linear in standard-normal space between them and continued linearly beyond.
``draws`` pairs of standard normals with correlation ``rho`` (a Gaussian copula) are pushed
through the two quantile functions, and the 2.5/10/90/97.5 % quantiles of the simulated ratios
are the 95 % and 80 % bounds. ``rho`` is the correlation of the two models' in-sample one-step
residuals over the fitted window (spend and tokens move together when a busy hour also costs
more; rho = 0 if fewer than 24 common points). A token draw at or below zero makes that ratio
infinite; an infinite bound is reported as NaN with flag ``ratio_unbounded``. The generator
is passed in, so results are reproducible.

**Check.** The ratio is also forecast directly (the historical hourly ratio through
:func:`forecast.select.forecast_series`); both are reported, with the mean relative
difference of the two point forecasts and the share of hours in which the direct point
forecast falls inside the simulated 80 % band (:class:`RatioCheck`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forecast.select import SeriesForecast
from forecast.types import F64, LEVELS, Prediction, Z

SCALE = 1e6
_MIN_COMMON = 24


def residual_correlation(a: F64, b: F64) -> float:
    """Correlation of two residual series aligned at their ends (both end at the last hour)."""
    k = min(a.shape[0], b.shape[0])
    x, y = a[a.shape[0] - k :], b[b.shape[0] - k :]
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < _MIN_COMMON or np.std(x[ok]) == 0 or np.std(y[ok]) == 0:
        return 0.0
    return float(np.clip(np.corrcoef(x[ok], y[ok])[0, 1], -0.99, 0.99))


def _quantile_function(pred: Prediction, z: F64) -> F64:
    """Values at standard-normal scores ``z`` (draws x h) from the 5 known quantiles per hour."""
    knots = np.array([-Z[95], -Z[80], 0.0, Z[80], Z[95]])
    values = np.vstack([pred.lower[95], pred.lower[80], pred.mean, pred.upper[80], pred.upper[95]])
    values = np.maximum.accumulate(values, axis=0)  # monotone even if a model's bands touch
    out = np.empty_like(z)
    for j in range(z.shape[1]):
        v = values[:, j]
        zz = z[:, j]
        inner = np.interp(zz, knots, v)
        lo_slope = (v[1] - v[0]) / (knots[1] - knots[0])
        hi_slope = (v[4] - v[3]) / (knots[4] - knots[3])
        inner = np.where(zz < knots[0], v[0] + (zz - knots[0]) * lo_slope, inner)
        out[:, j] = np.where(zz > knots[-1], v[4] + (zz - knots[-1]) * hi_slope, inner)
    return out


def ratio_prediction(
    spend: Prediction,
    tokens: Prediction,
    *,
    rho: float,
    rng: np.random.Generator,
    draws: int = 2000,
    scale: float = SCALE,
) -> tuple[Prediction, tuple[str, ...]]:
    """Cost per ``scale`` tokens: point = ratio of point forecasts; intervals simulated."""
    flags: list[str] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(tokens.mean > 0, spend.mean / tokens.mean * scale, np.nan)
    if np.isnan(mean).any():
        flags.append("ratio_undefined")
    h = spend.h
    z1 = rng.standard_normal((draws, h))
    z2 = rho * z1 + np.sqrt(1.0 - rho * rho) * rng.standard_normal((draws, h))
    s = np.maximum(_quantile_function(spend, z1), 0.0)
    t = _quantile_function(tokens, z2)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(t > 0, s / t * scale, np.inf)
    qs = {95: (2.5, 97.5), 80: (10.0, 90.0)}
    lower: dict[int, F64] = {}
    upper: dict[int, F64] = {}
    for lv in LEVELS:
        lo_q, hi_q = qs[lv]
        with np.errstate(invalid="ignore"):  # inf - inf between two infinite draws -> NaN
            lo = np.percentile(r, lo_q, axis=0)
            hi = np.percentile(r, hi_q, axis=0)
        lower[lv] = np.where(np.isfinite(lo), lo, np.nan)
        upper[lv] = np.where(np.isfinite(hi), hi, np.nan)
    if any(np.isnan(upper[lv]).any() for lv in LEVELS):
        flags.append("ratio_unbounded")
    return Prediction(mean, lower, upper), tuple(flags)


@dataclass(frozen=True)
class RatioCheck:
    """How the ratio forecast and the direct forecast of the ratio compare."""

    direct_model: str
    mean_rel_diff: float  # mean |direct - ratio| / ratio over hours where both are defined
    direct_inside80: float  # share of hours where the direct point forecast is in the ratio's 80 % band

    def as_dict(self) -> dict[str, float | str]:
        return {
            "direct_model": self.direct_model,
            "mean_rel_diff": self.mean_rel_diff,
            "direct_inside80": self.direct_inside80,
        }


def check_against_direct(ratio: Prediction, direct: SeriesForecast) -> RatioCheck:
    m, d = ratio.mean, direct.prediction.mean
    ok = np.isfinite(m) & np.isfinite(d) & (m > 0)
    rel = float(np.mean(np.abs(d[ok] - m[ok]) / m[ok])) if ok.any() else float("nan")
    # A noise-free history gives zero-width bands; rounding must not put an equal forecast outside.
    tol = 1e-9 * np.abs(np.nan_to_num(m))
    lo, hi = ratio.lower[80] - tol, ratio.upper[80] + tol
    band = np.isfinite(lo) & np.isfinite(d)
    hi_ok = np.where(np.isfinite(hi), d <= hi, True)
    inside = float(np.mean((d[band] >= lo[band]) & hi_ok[band])) if band.any() else float("nan")
    return RatioCheck(direct.model, rel, inside)


def historical_ratio(spend: F64, tokens: F64, scale: float = SCALE) -> F64:
    """Hourly cost per ``scale`` tokens; NaN where tokens are zero or either is unknown."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where((tokens > 0) & np.isfinite(spend) & (spend >= 0), spend / tokens * scale, np.nan)
    return np.asarray(r, dtype=np.float64)
