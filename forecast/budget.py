"""Budget early warning: when will spend cross the period budget, when will unit cost breach
its budget -- pure arithmetic on an hourly forecast, for the rules engine to turn into alerts.

Spend (:func:`budget_projection`). Cumulative spend = ``spent`` so far in the period + the
forecast spend of the hours ahead, each hour's spend spread evenly over the hour (so the hour
in progress counts only for its remaining part, and a crossing falls at an exact millisecond
inside its hour). Two paths are projected up to ``min(now + horizon, period end, forecast
end)``: the point forecast (``mean``) and the upper 80 % bound (``hi80`` hour by hour).
Summing hourly upper bounds gives the 80 % quantile of the sum only when the hours' errors
move together (comonotone); forecast errors of one series *are* strongly correlated across
hours (a level that is off stays off), and where they are not the sum is conservative -- the
right side to err on for a warning.

Severity: ``critical`` if the mean path crosses (or the budget is already spent), ``warn`` if
only the upper-80 % path does, ``ok`` otherwise; ``unknown`` if the forecast has no values for
the hours that matter (the rules engine should treat that as its own condition, not as ok).

Unit cost (:func:`unit_cost_projection`): the first hour whose forecast cost per 1M tokens
exceeds ``budget x (1 + tolerance)``; mean -> critical, upper 80 % -> warn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from forecast.ids import HOUR_MS
from forecast.types import F64

Severity = Literal["ok", "warn", "critical", "unknown"]
DEFAULT_HORIZON_MS = 72 * HOUR_MS


class ForecastPath(Protocol):
    """What the projections read; :class:`forecast.record.StoredForecast` is one."""

    @property
    def start_ms(self) -> int: ...

    @property
    def step_ms(self) -> int: ...

    @property
    def mean(self) -> F64: ...

    @property
    def hi80(self) -> F64: ...


@dataclass(frozen=True)
class BudgetProjection:
    severity: Severity
    budget: float
    spent: float
    now_ms: int
    until_ms: int  # the end of the projected window
    crossing_at_ms_mean: int | None  # when the mean path crosses the budget
    crossing_at_ms_upper: int | None  # when the upper-80 % path crosses it
    projected_mean: float  # cumulative spend at ``until_ms`` on the mean path
    projected_upper: float  # ... on the upper-80 % path
    message: str


@dataclass(frozen=True)
class UnitCostProjection:
    severity: Severity
    budget_per_mtok: float
    threshold: float  # budget x (1 + tolerance)
    now_ms: int
    until_ms: int
    breach_at_ms_mean: int | None  # start of the first hour whose mean exceeds the threshold
    breach_at_ms_upper: int | None  # ... whose upper 80 % bound exceeds it
    peak_mean: float
    peak_upper: float
    message: str


def _window(
    forecast: ForecastPath, now_ms: int, horizon_ms: int, period_end_ms: int | None
) -> tuple[int, F64]:
    """End of the projected window, and each forecast hour's share inside (now, end]."""
    n = int(forecast.mean.shape[0])
    end = min(now_ms + horizon_ms, forecast.start_ms + n * forecast.step_ms)
    if period_end_ms is not None:
        end = min(end, period_end_ms)
    starts = forecast.start_ms + np.arange(n, dtype=np.int64) * forecast.step_ms
    overlap = np.minimum(starts + forecast.step_ms, end) - np.maximum(starts, now_ms)
    return end, np.clip(overlap, 0, None) / forecast.step_ms


def _crossing(
    values: F64, share: F64, remaining: float, forecast: ForecastPath, now_ms: int
) -> tuple[int | None, float]:
    """First time the cumulative amount exceeds ``remaining``; and the total over the window."""
    cum = 0.0
    crossing: int | None = None
    for i in np.flatnonzero(share > 0):
        rate = float(values[i])  # per step
        amount = rate * float(share[i])
        if crossing is None and rate > 0 and cum + amount > remaining:
            begin = max(forecast.start_ms + int(i) * forecast.step_ms, now_ms)
            crossing = begin + int(math.floor((remaining - cum) / rate * forecast.step_ms))
        cum += amount
    return crossing, cum


def budget_projection(
    *,
    budget: float,
    spent: float,
    now_ms: int,
    forecast: ForecastPath,
    period_end_ms: int | None = None,
    horizon_ms: int = DEFAULT_HORIZON_MS,
) -> BudgetProjection:
    """Will cumulative spend cross ``budget`` within ``horizon_ms`` (and before the period ends)?

    ``spent`` is the spend of the period up to ``now_ms``; ``forecast`` is the hourly spend
    forecast ($/h). See the module docstring for the arithmetic.
    """
    end, share = _window(forecast, now_ms, horizon_ms, period_end_ms)
    if spent >= budget:
        return BudgetProjection(
            "critical", budget, spent, now_ms, end, now_ms, now_ms, spent, spent,
            f"budget already spent: {spent:.2f} of {budget:.2f}",
        )  # fmt: skip
    used = share > 0
    if not used.any() or not (
        np.isfinite(forecast.mean[used]).all() and np.isfinite(forecast.hi80[used]).all()
    ):
        return BudgetProjection(
            "unknown", budget, spent, now_ms, end, None, None, math.nan, math.nan,
            "no spend forecast for the hours ahead",
        )  # fmt: skip
    remaining = budget - spent
    at_mean, sum_mean = _crossing(forecast.mean, share, remaining, forecast, now_ms)
    at_upper, sum_upper = _crossing(
        np.maximum(forecast.hi80, forecast.mean), share, remaining, forecast, now_ms
    )
    if at_mean is not None:
        severity: Severity = "critical"
        message = f"spend projected to cross the budget {budget:.2f} at {_hours(at_mean - now_ms)} from now"
    elif at_upper is not None:
        severity = "warn"
        message = (
            f"spend may cross the budget {budget:.2f} (upper 80 %) at {_hours(at_upper - now_ms)} from now"
        )
    else:
        severity = "ok"
        message = f"spend projected at {spent + sum_mean:.2f} of {budget:.2f} by the end of the window"
    return BudgetProjection(
        severity, budget, spent, now_ms, end, at_mean, at_upper, spent + sum_mean, spent + sum_upper, message
    )


def unit_cost_projection(
    *,
    budget_per_mtok: float,
    forecast: ForecastPath,
    now_ms: int,
    tolerance: float = 0.0,
    period_end_ms: int | None = None,
    horizon_ms: int = DEFAULT_HORIZON_MS,
) -> UnitCostProjection:
    """Will the hourly cost per 1M tokens exceed ``budget_per_mtok x (1 + tolerance)``?"""
    end, share = _window(forecast, now_ms, horizon_ms, period_end_ms)
    threshold = budget_per_mtok * (1.0 + tolerance)
    used = np.flatnonzero(share > 0)
    mean = forecast.mean[used]
    upper = np.fmax(forecast.hi80[used], mean)  # an unbounded (NaN) upper bound falls back to the mean
    if used.size == 0 or not np.isfinite(mean).any():
        return UnitCostProjection(
            "unknown", budget_per_mtok, threshold, now_ms, end, None, None, math.nan, math.nan,
            "no cost-per-token forecast for the hours ahead",
        )  # fmt: skip

    def first(values: F64) -> int | None:
        hits = np.flatnonzero(np.nan_to_num(values, nan=-np.inf) > threshold)
        if hits.size == 0:
            return None
        return max(forecast.start_ms + int(used[hits[0]]) * forecast.step_ms, now_ms)

    at_mean, at_upper = first(mean), first(upper)
    peak_mean, peak_upper = float(np.nanmax(mean)), float(np.nanmax(upper))
    if at_mean is not None:
        severity: Severity = "critical"
        message = f"cost per 1M tokens projected above {threshold:.4g} at {_hours(at_mean - now_ms)} from now"
    elif at_upper is not None:
        severity = "warn"
        message = f"cost per 1M tokens may exceed {threshold:.4g} (upper 80 %) at {_hours(at_upper - now_ms)} from now"
    else:
        severity = "ok"
        message = f"cost per 1M tokens projected at most {peak_mean:.4g} (threshold {threshold:.4g})"
    return UnitCostProjection(
        severity, budget_per_mtok, threshold, now_ms, end, at_mean, at_upper, peak_mean, peak_upper, message
    )


def _hours(ms: int) -> str:
    return f"{ms / HOUR_MS:.1f} h"
