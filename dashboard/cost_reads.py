"""Cost reads: the ledger's spend broken down, the budget that applies, cumulative spend of its
period, forecasts placed in time (with the budget crossing from :mod:`forecast.budget`), and
the price book as table rows."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from cost.ledger import HOUR_MS, period_start_ms
from cost.prices import Budget, CostSettings
from dashboard.model import Band, Bar, BudgetLine, Crossing, Line
from dashboard.queries import Filters
from dashboard.sources import ForecastPoints, Sources
from forecast.budget import budget_projection

DIMENSIONS = ("model", "node", "gpu_model", "tenant")
FORECAST_HORIZON_MS = 72 * HOUR_MS
BLANK = {"model": "unattributed", "node": "(none)", "gpu_model": "node overhead", "tenant": "(no tenant)"}


def hour_floor(ms: int) -> int:
    return ms - ms % HOUR_MS


# -- spend --------------------------------------------------------------------------------------
def spend_breakdown(sources: Sources, start_ms: int, end_ms: int, filters: Filters) -> dict[str, list[Bar]] | None:
    """Spend in the hours touching [start, end) per dimension, each bar split by component."""
    if sources.ledger is None:
        return None
    rows = sources.ledger.spend(hour_floor(start_ms), hour_floor(end_ms) + HOUR_MS, [*DIMENSIONS, "component"])
    out: dict[str, dict[tuple[str, str], float]] = {d: defaultdict(float) for d in DIMENSIONS}
    for row in rows:
        if filters.models and row["model"] not in filters.models:
            continue
        if filters.nodes and row["node"] not in filters.nodes:
            continue
        dollars = float(row["dollars"] or 0.0)
        for dim in DIMENSIONS:
            out[dim][(str(row[dim] or "") or BLANK[dim], str(row["component"]))] += dollars
    return {dim: [Bar(label, value, comp) for (label, comp), value in cells.items()] for dim, cells in out.items()}


def hourly_spend(sources: Sources, start_ms: int, end_ms: int, filters: Filters) -> dict[int, float] | None:
    """Ledger dollars per hour starting in [start, end) for the view's models and nodes; the
    hour in progress is included with what it has cost so far (the ledger prices it every
    minute). The one read behind "Spend per hour" and "Spend today", so the two agree."""
    if sources.ledger is None:
        return None
    by = ["hour_ms", *(["model"] if filters.models else []), *(["node"] if filters.nodes else [])]
    out: dict[int, float] = defaultdict(float)
    for row in sources.ledger.spend(start_ms, end_ms, by):
        if (filters.models and row["model"] not in filters.models) or (filters.nodes and row["node"] not in filters.nodes):
            continue
        out[int(row["hour_ms"])] += float(row["dollars"] or 0.0)
    return dict(out)


def spend_total(sources: Sources, start_ms: int, end_ms: int, filters: Filters) -> float | None:
    hourly = hourly_spend(sources, start_ms, end_ms, filters)
    return None if hourly is None else sum(hourly.values())


def spend_so_far(sources: Sources, filters: Filters, now_ms: int, period: str) -> float | None:
    """Spend of this day (week, month) through the hour in progress."""
    return spend_total(sources, period_start_ms(now_ms, period), hour_floor(now_ms) + HOUR_MS, filters)


# -- budgets ------------------------------------------------------------------------------------
def period_end_ms(start_ms: int, period: str) -> int:
    start = datetime.fromtimestamp(start_ms / 1000, UTC)
    if period == "day":
        end = start + timedelta(days=1)
    elif period == "week":
        end = start + timedelta(days=7)
    else:
        end = (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return int(end.timestamp() * 1000)


def spend_budget(cost: CostSettings, filters: Filters, period: str | None = None) -> Budget | None:
    """The spend budget for the view: the selected model's when exactly one model is selected
    and it has one, else the fleet's; optionally of one period (day, week, month)."""
    budgets = [b for b in cost.budgets if b.spend_per_period is not None and (period is None or b.period == period)]
    if len(filters.models) == 1:
        for b in budgets:
            if b.scope == "model" and b.model == filters.models[0]:
                return b
    return next((b for b in budgets if b.scope == "fleet"), None)


def unit_budget(cost: CostSettings, filters: Filters) -> Budget | None:
    budgets = [b for b in cost.budgets if b.cost_per_million_tokens is not None]
    if len(filters.models) == 1:
        for b in budgets:
            if b.scope == "model" and b.model == filters.models[0]:
                return b
    return next((b for b in budgets if b.scope == "fleet"), None)


def budget_scope(budget: Budget) -> Filters:
    return Filters(models=(budget.model,)) if budget.scope == "model" else Filters()


@dataclass(frozen=True)
class PeriodSpend:
    budget: BudgetLine | None
    actual: Line | None
    spent: float
    start_ms: int
    end_ms: int
    scope: Filters  # whose spend: the budget's model, or the fleet


def period_spend(sources: Sources, filters: Filters, now_ms: int) -> PeriodSpend | None:
    """Cumulative spend of the applicable budget's period (this month without a budget)."""
    if sources.ledger is None:
        return None
    budget = spend_budget(sources.price_book(), filters)
    period = budget.period if budget is not None else "month"
    scope = budget_scope(budget) if budget is not None else Filters(models=filters.models)
    start = period_start_ms(now_ms, period)
    end = period_end_ms(start, period)
    models: list[str | None] = list(scope.models) if scope.models else [None]
    hourly: dict[int, float] = defaultdict(float)
    for model in models:
        for hour, dollars in sources.ledger.hourly_series(start, hour_floor(now_ms) + HOUR_MS, model)["spend"].items():
            hourly[hour] += dollars
    hours = sorted(h for h in hourly if h <= now_ms)
    ts = np.asarray([start] + [min(h + HOUR_MS, now_ms) for h in hours], np.int64)
    values = np.concatenate([[0.0], np.cumsum([hourly[h] for h in hours])])
    spent = float(values[-1])
    line = Line("spent", ts, values) if hours else None
    scope_text = f"model {budget.model}" if budget is not None and budget.scope == "model" else "fleet"
    budget_line = (
        BudgetLine(float(budget.spend_per_period or 0.0), f"{scope_text} budget per {period}", start, end)
        if budget is not None else None
    )  # fmt: skip
    return PeriodSpend(budget_line, line, spent, start, end, scope)


# -- forecasts ----------------------------------------------------------------------------------
def forecast_id(quantity: str, filters: Filters) -> str:
    """The forecast series for the view: one selected model's, else the fleet's."""
    return f"{quantity}:model={filters.models[0]}" if len(filters.models) == 1 else f"{quantity}:fleet"


NO_FORECAST_SERVICE = ("no forecast yet: the forecast service is not running in this process, so there is no 72 h "
                       "forecast to draw (forecasts need a few hours of cost history)")
NO_FORECAST_SERIES = "no forecast yet for {series}: the forecast service has not produced one (it needs a few hours of cost history)"
MANY_MODELS = "no forecast for several models at once: forecasts are per model or for the fleet; select one model or none"


def latest_forecast(sources: Sources, quantity: str, filters: Filters) -> tuple[ForecastPoints | None, str]:
    """The newest forecast for the view, or None and why there is none."""
    if len(filters.models) > 1:
        return None, MANY_MODELS
    if sources.forecasts is None:
        return None, NO_FORECAST_SERVICE
    series = forecast_id(quantity, filters)
    found = sources.forecasts.latest(series)
    return found, "" if found is not None else NO_FORECAST_SERIES.format(series=series)


def forecast_band(points: ForecastPoints, now_ms: int, horizon_ms: int = FORECAST_HORIZON_MS) -> Band | None:
    """The hours of a forecast from the one in progress through ``now + horizon``."""
    n = int(points.mean.shape[0])
    starts = points.start_ms + np.arange(n, dtype=np.int64) * points.step_ms
    keep = (starts + points.step_ms > now_ms) & (starts < now_ms + horizon_ms)
    if not keep.any():
        return None
    coverage = {lv: c for lv, c in ((80, points.backtest_coverage80), (95, points.backtest_coverage95)) if c is not None}
    return Band(starts[keep], points.mean[keep], points.lo80[keep], points.hi80[keep], points.lo95[keep], points.hi95[keep],
                f"forecast ({points.model})", coverage or None)


def cumulative_path(points: ForecastPoints, spent: float, now_ms: int, until_ms: int) -> Band | None:
    """Spend from ``now`` on: ``spent`` plus each forecast hour's share inside (now, until]
    (the arithmetic of :func:`forecast.budget.budget_projection`, plotted)."""
    n = int(points.mean.shape[0])
    starts = points.start_ms + np.arange(n, dtype=np.int64) * points.step_ms
    ends = np.minimum(starts + points.step_ms, until_ms)
    share = np.clip(ends - np.maximum(starts, now_ms), 0, None) / points.step_ms
    used = share > 0
    if not used.any():
        return None

    def path(values: np.ndarray) -> np.ndarray:
        return np.concatenate([[spent], spent + np.cumsum(np.nan_to_num(values[used]) * share[used])])

    ts = np.concatenate([[now_ms], ends[used]]).astype(np.int64)
    return Band(ts, path(points.mean), path(points.lo80), path(np.fmax(points.hi80, points.mean)), path(points.lo95),
                path(np.fmax(points.hi95, points.mean)), "forecast spend")


def crossing(points: ForecastPoints, budget: BudgetLine, spent: float, now_ms: int) -> Crossing:
    projection = budget_projection(
        budget=budget.amount, spent=spent, now_ms=now_ms, forecast=points, period_end_ms=budget.period_end_ms,
        horizon_ms=FORECAST_HORIZON_MS,
    )
    return Crossing(projection.crossing_at_ms_mean, projection.crossing_at_ms_upper, projection.message)


# -- the price book -----------------------------------------------------------------------------
CPU_EXAMPLE = "CPU node{s} priced at the example ${price:,.4g}/node-hour — set cost.cpu_dollars_per_node_hour"
GPU_EXAMPLE = "GPUs priced at the example placeholder ${price:,.4g}/GPU-hour (gpu_model '*') — set cost.gpu_prices"


def example_price_notes(cost: CostSettings, *, cpu_nodes: int, gpus: bool) -> list[str]:
    """What is priced with a default the user did not set: the example CPU node-hour price
    (when ``cpu_nodes`` nodes run engines on CPUs only) and the '*' GPU placeholder."""
    notes: list[str] = []
    if cpu_nodes and "cpu_dollars_per_node_hour" not in cost.model_fields_set:
        notes.append(CPU_EXAMPLE.format(s="s" if cpu_nodes > 1 else "", price=cost.cpu_dollars_per_node_hour))
    placeholder = [p for p in cost.gpu_prices if p.gpu_model == "*"]
    if gpus and placeholder and "gpu_prices" not in cost.model_fields_set:
        notes.append(GPU_EXAMPLE.format(price=placeholder[-1].dollars_per_gpu_hour))
    return notes


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _status(from_ms: int, current: bool, now_ms: int) -> str:
    if from_ms > now_ms:
        return "scheduled"
    return "in effect" if current else "superseded"


def price_rows(cost: CostSettings, now_ms: int) -> dict[str, list[list[str]]]:
    """The price book as tables: GPU prices, electricity, overhead, nodes and budgets, each
    entry with the date it takes effect and whether it is in effect now."""
    gpu: list[list[str]] = []
    latest: dict[tuple[str, str], int] = {}
    for p in cost.gpu_prices:
        if p.from_ms <= now_ms:
            key = (p.gpu_model, p.purchase_class)
            latest[key] = max(latest.get(key, p.from_ms), p.from_ms)
    for p in sorted(cost.gpu_prices, key=lambda p: (p.gpu_model, p.purchase_class, p.from_ms)):
        current = latest.get((p.gpu_model, p.purchase_class)) == p.from_ms
        gpu.append([p.gpu_model, p.purchase_class, f"${p.dollars_per_gpu_hour:,.4g}", _day(p.from_ms), _status(p.from_ms, current, now_ms)])

    def single(entries: list[tuple[int, str]]) -> list[list[str]]:
        past = [t for t, _ in entries if t <= now_ms]
        now_from = max(past) if past else None
        return [[text, _day(t), _status(t, t == now_from, now_ms)] for t, text in sorted(entries)]

    power = single([(e.from_ms, f"${e.dollars_per_kwh:,.4g}/kWh × PUE {e.pue:g}") for e in cost.electricity])
    overhead = single([(e.from_ms, f"${e.dollars_per_node_hour:,.4g}/node-hour") for e in cost.overhead])
    nodes = [[n.host, n.purchase_class, n.model or "(from labels)"] for n in cost.nodes]
    budgets = [
        [b.scope, b.model or "-", f"${b.cost_per_million_tokens:,.4g}" if b.cost_per_million_tokens else "-",
         f"${b.spend_per_period:,.2f}" if b.spend_per_period else "-", b.period]
        for b in cost.budgets
    ]
    return {"gpu": gpu, "electricity": power, "overhead": overhead, "nodes": nodes, "budgets": budgets}


__all__ = [
    "spend_breakdown", "hourly_spend", "spend_total", "spend_so_far", "spend_budget", "unit_budget", "period_spend",
    "PeriodSpend", "forecast_id", "example_price_notes", "latest_forecast", "forecast_band", "cumulative_path",
    "crossing", "price_rows", "period_end_ms", "DIMENSIONS",
]  # fmt: skip
