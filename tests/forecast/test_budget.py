"""Budget early warning arithmetic, against hand-computed crossings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forecast.budget import budget_projection, unit_cost_projection
from forecast.types import F64

H = 3_600_000
T0 = 1_800_000_000_000  # on an hour boundary


@dataclass(frozen=True)
class Path:
    start_ms: int
    mean: F64
    hi80: F64
    step_ms: int = H


def flat(mean: float, hi: float, hours: int = 72, start: int = T0) -> Path:
    return Path(start, np.full(hours, mean), np.full(hours, hi))


def test_mean_crossing_is_critical_with_exact_time() -> None:
    # 100 left; mean 10/h -> crosses after 10 h; upper 20/h -> after 5 h
    p = budget_projection(budget=1000, spent=900, now_ms=T0, forecast=flat(10, 20))
    assert p.severity == "critical"
    assert p.crossing_at_ms_mean == T0 + 10 * H
    assert p.crossing_at_ms_upper == T0 + 5 * H
    assert p.projected_mean == 900 + 72 * 10


def test_only_upper_crossing_warns() -> None:
    # 100 left; mean 1/h -> 72 over 72 h, no crossing; upper 2/h -> crosses after 50 h
    p = budget_projection(budget=1000, spent=900, now_ms=T0, forecast=flat(1, 2))
    assert p.severity == "warn"
    assert p.crossing_at_ms_mean is None
    assert p.crossing_at_ms_upper == T0 + 50 * H
    assert p.projected_mean == 972 and p.projected_upper == 1044


def test_ok_when_nothing_crosses_within_72h() -> None:
    p = budget_projection(budget=1000, spent=0, now_ms=T0, forecast=flat(1, 2, hours=200))
    assert p.severity == "ok" and p.until_ms == T0 + 72 * H
    assert p.projected_upper == 144


def test_hour_in_progress_counts_only_for_its_rest() -> None:
    # now is 30 min into the first forecast hour (its spend so far is already in `spent`):
    # the rest of hour 0 adds 5, then 10 per hour: 100 left -> 5 + 9.5 h x 10 -> 10 h from now
    now = T0 + H // 2
    p = budget_projection(budget=100, spent=0, now_ms=now, forecast=flat(10, 10))
    assert p.crossing_at_ms_mean == now + 10 * H
    assert p.until_ms == T0 + 72 * H  # the forecast ends before now + 72 h
    assert p.projected_mean == 5 + 71 * 10


def test_uneven_hours_interpolate_inside_the_hour() -> None:
    path = Path(T0, np.array([10.0, 40.0, 10.0]), np.array([10.0, 40.0, 10.0]))
    p = budget_projection(budget=30, spent=0, now_ms=T0, forecast=path)
    # 10 after hour 0, then 20 more at 40/h -> half an hour into hour 1
    assert p.crossing_at_ms_mean == T0 + H + H // 2


def test_period_end_stops_the_projection() -> None:
    p = budget_projection(budget=100, spent=0, now_ms=T0, forecast=flat(10, 10), period_end_ms=T0 + 5 * H)
    assert p.severity == "ok" and p.until_ms == T0 + 5 * H and p.projected_mean == 50


def test_already_over_budget() -> None:
    p = budget_projection(budget=100, spent=120, now_ms=T0, forecast=flat(1, 1))
    assert p.severity == "critical" and p.crossing_at_ms_mean == T0 == p.crossing_at_ms_upper


def test_missing_forecast_is_unknown_not_ok() -> None:
    p = budget_projection(budget=100, spent=0, now_ms=T0, forecast=flat(float("nan"), float("nan")))
    assert p.severity == "unknown"
    late = budget_projection(budget=100, spent=0, now_ms=T0 + 100 * H, forecast=flat(1, 1))
    assert late.severity == "unknown"


def test_unit_cost_breach() -> None:
    mean = np.array([1.0, 1.0, 1.1, 1.3, 1.0])
    hi = np.array([1.1, 1.2, 1.3, 1.5, 1.2])
    path = Path(T0, mean, hi)
    p = unit_cost_projection(budget_per_mtok=1.0, forecast=path, now_ms=T0, tolerance=0.15)
    assert p.threshold == 1.15
    assert p.severity == "critical"
    assert p.breach_at_ms_mean == T0 + 3 * H
    assert p.breach_at_ms_upper == T0 + 1 * H
    warn = unit_cost_projection(budget_per_mtok=1.35, forecast=path, now_ms=T0 + H // 2)
    assert warn.severity == "warn" and warn.breach_at_ms_mean is None
    assert warn.breach_at_ms_upper == T0 + 3 * H
    assert warn.peak_mean == 1.3 and warn.peak_upper == 1.5
    in_progress = unit_cost_projection(budget_per_mtok=1.0, forecast=path, now_ms=T0 + H // 2)
    assert in_progress.breach_at_ms_upper == T0 + H // 2  # the hour in progress breaches now
    ok = unit_cost_projection(budget_per_mtok=2.0, forecast=path, now_ms=T0)
    assert ok.severity == "ok"
    nan_upper = Path(T0, mean, np.full(5, np.nan))  # an unbounded upper bound falls back to the mean
    assert unit_cost_projection(budget_per_mtok=1.2, forecast=nan_upper, now_ms=T0).severity == "critical"
