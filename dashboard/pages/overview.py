"""Overview: cost per 1M tokens now vs budget; spend today and this month vs budget with the
72 h forecast and its band; fleet tokens/s; P99 latency; failure rate; utilization; alerts."""

from __future__ import annotations

import numpy as np
from dash import Dash, html

from cost.ledger import HOUR_MS, period_start_ms
from dashboard import alert_reads, cost_reads
from dashboard.figures.common import Figure, note
from dashboard.figures.kpi import kpi_figure
from dashboard.figures.series import budget_figure, forecast_figure, lines_figure
from dashboard.model import Kpi, Line
from dashboard.pages.common import (
    BUDGET_HINT,
    FORECAST_HINT,
    GPU_HINT,
    INFERENCE_HINT,
    LEDGER_HINT,
    LIVE_COST_HINT,
    RULES_HINT,
    Page,
    hint,
    ratio_line,
)  # fmt: skip
from dashboard.panel import Panel, PanelContext, graph_panel, table_panel
from dashboard.queries import View, selector_text
from dashboard.tables import alerts_table, message
from store.series_index import Matcher

KPIS = Panel("overview-kpis", "Now", wide=True, height=260)
HOURLY, IN_PROGRESS = "spend $/h", "this hour so far ($)"
SPEND = Panel("overview-spend", "Spend per hour, with the 72 h forecast and its 80 / 95 % bands")
BUDGET = Panel("overview-budget", "Spend this budget period vs budget, with the forecast")
TOKENS = Panel("overview-tokens", "Generated tokens per second")
LATENCY = Panel("overview-latency", "P99 latency (log scale)")
FAILURES = Panel("overview-failures", "Failure rate")
UTIL = Panel("overview-util", "GPU utilization (mean, min, max across GPUs)")
ALERTS = Panel("overview-alerts", "Firing and pending alerts", kind="table", wide=True)
PANELS = (KPIS, SPEND, BUDGET, TOKENS, LATENCY, FAILURES, UTIL, ALERTS)


def kpis(ctx: PanelContext, view: View) -> Figure:
    q, src, t = ctx.queries, ctx.sources, ctx.sources.targets
    now = view.now_ms
    inf = q.inference_matchers("inference_requests_total", view.filters) or ()
    gpu = q.gpu_matchers(view.filters)
    scope = ([("scope", "model"), ("model", view.filters.models[0])] if len(view.filters.models) == 1 else [("scope", "fleet")])
    scope_text = ", ".join(f'{k}="{v}"' for k, v in scope)
    per_m = q.instant_one(f"infermeter_cost_per_million_tokens_dollars{{{scope_text}}}", now)
    unit = cost_reads.unit_budget(src.cost, view.filters)
    items = [Kpi("Cost per 1M tokens" + (f" ({view.filters.models[0]})" if len(view.filters.models) == 1 else ""), per_m,
                 prefix="$", reference=unit.cost_per_million_tokens if unit else None, hint=LIVE_COST_HINT)]
    for title, period in (("Spend today", "day"), ("Spend this month", "month")):
        spent = cost_reads.spend_so_far(src, view.filters, now, period)
        budget = cost_reads.spend_budget(src.cost, view.filters, period)
        items.append(Kpi(title, spent, prefix="$", digits=4, reference=budget.spend_per_period if budget else None,
                         reference_label=f"{period}ly budget".replace("dayly", "daily"), as_share=True,
                         hint=LEDGER_HINT if spent is None else ""))
    tokens = q.instant_one(f"sum(rate({selector_text('inference_generation_tokens_total', inf)}[5m]))", now)
    items.append(Kpi("Tokens / s", tokens, hint=INFERENCE_HINT, lower_is_better=False))
    itl = q.instant_one("histogram_quantile(0.99, sum by (le) (rate("
                        f"{selector_text('inference_inter_token_latency_seconds_bucket', inf)}[5m])))", now)
    items.append(Kpi("P99 inter-token latency", itl * 1000 if itl is not None else None, suffix=" ms",
                     reference=t.inter_token_p99_seconds * 1000, reference_label="SLA", hint=INFERENCE_HINT))
    failed = selector_text("inference_requests_total", inf, 'outcome="failure"')
    rate = q.instant_one(f"sum(rate({failed}[5m])) / sum(rate({selector_text('inference_requests_total', inf)}[5m]))", now)
    items.append(Kpi("Failure rate", rate * 100 if rate is not None else None, suffix=" %", reference=t.failure_rate * 100,
                     reference_label="alert at", hint=INFERENCE_HINT))
    util = q.instant_one(f"avg({selector_text('gpu_utilization_ratio', gpu)})", now) if gpu is not None else None
    items.append(Kpi("GPU utilization", util * 100 if util is not None else None, suffix=" %", lower_is_better=False,
                     reference=t.utilization_target * 100, reference_label="target", hint=GPU_HINT))
    active = alert_reads.active_alerts(src, view.filters, now)
    firing = None if active is None else float(sum(1 for a in active if a.state == "firing"))
    items.append(Kpi("Alerts firing", firing, digits=0, hint=RULES_HINT))
    return kpi_figure(items)


def spend(ctx: PanelContext, view: View) -> Figure:
    """Closed hours as $/h; the hour in progress as what it has cost so far (as "Spend today"
    counts it), and today's total in a note, so the two always agree."""
    src, now = ctx.sources, view.now_ms
    start = view.start_ms - view.start_ms % HOUR_MS
    today = period_start_ms(now, "day")
    current = now - now % HOUR_MS
    hourly = cost_reads.hourly_spend(src, min(start, today), current + HOUR_MS, view.filters)
    if hourly is None:
        return forecast_figure([], None, empty_text=LEDGER_HINT, no_forecast_text=FORECAST_HINT)
    closed = sorted(h for h in hourly if start <= h < current)
    history = [Line(HOURLY, np.asarray(closed, np.int64), np.asarray([hourly[h] for h in closed]))] if closed else []
    if current in hourly:
        history.append(Line(IN_PROGRESS, np.asarray([current], np.int64), np.asarray([hourly[current]])))
    points, why = cost_reads.latest_forecast(src, "spend", view.filters)
    band = cost_reads.forecast_band(points, now) if points is not None else None
    figure = forecast_figure(history, band, empty_text=hint(view, LEDGER_HINT), no_forecast_text=why or FORECAST_HINT,
                             y_title="$ per hour", y_format="$,.2f")
    if history:
        if band is None:  # the hours of the range, whole, so one lone hour is not stretched over the axis
            figure["layout"]["xaxis"]["range"] = [start - HOUR_MS // 2, current + HOUR_MS // 2]
        spent = sum(v for h, v in hourly.items() if h >= today)
        note(figure, f"spend today ${spent:,.4g}, ${hourly.get(current, 0.0):,.4g} of it in the hour in progress")
    return figure


def budget(ctx: PanelContext, view: View) -> Figure:
    src = ctx.sources
    period = cost_reads.period_spend(src, view.filters, view.now_ms)
    if period is None:
        return budget_figure(None, None, None, None, empty_text=LEDGER_HINT, no_forecast_text=FORECAST_HINT,
                             no_budget_text=BUDGET_HINT)
    points, why = cost_reads.latest_forecast(src, "spend", period.scope)
    path = crossing = None
    if points is not None:
        path = cost_reads.cumulative_path(points, period.spent, view.now_ms, min(period.end_ms, view.now_ms + cost_reads.FORECAST_HORIZON_MS))
        if period.budget is not None:
            crossing = cost_reads.crossing(points, period.budget, period.spent, view.now_ms)
    return budget_figure(period.actual, path, period.budget, crossing, empty_text=hint(view, LEDGER_HINT),
                         no_forecast_text=why or FORECAST_HINT, no_budget_text=BUDGET_HINT)


def tokens(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    m = q.inference_matchers("inference_generation_tokens_total", view.filters)
    lines = q.range("inference_generation_tokens_total", m, view, fn="rate", by=("model",))
    return lines_figure(lines, empty_text=hint(view, INFERENCE_HINT), y_title="tokens / s", kind="area")


def latency(ctx: PanelContext, view: View) -> Figure:
    q, t = ctx.queries, ctx.sources.targets
    lines: list[Line] = []
    for metric, label in (("inference_inter_token_latency_seconds", "inter-token"),
                          ("inference_time_to_first_token_seconds", "time to first token"),
                          ("inference_e2e_request_latency_seconds", "end-to-end")):
        m = q.inference_matchers(f"{metric}_bucket", view.filters)
        for line in q.quantiles(metric, (0.99,), m, view):
            lines.append(Line(f"{label} p99", line.ts_ms, line.values))
    figure = lines_figure(lines, empty_text=hint(view, INFERENCE_HINT), y_title="seconds",
                          thresholds=[(t.inter_token_p99_seconds, f"inter-token SLA {t.inter_token_p99_seconds * 1000:g} ms")])
    if figure["data"]:
        figure["layout"]["yaxis"].update(type="log", rangemode="normal", dtick=1)
    return figure


def failures(ctx: PanelContext, view: View) -> Figure:
    q, t = ctx.queries, ctx.sources.targets
    m = q.inference_matchers("inference_requests_total", view.filters)
    if m is None:
        return lines_figure([], empty_text=hint(view, INFERENCE_HINT))
    window = q.window_for("inference_requests_total", m, view)
    failed = q.range("inference_requests_total", (*m, Matcher("outcome", "=", "failure")), view, fn="increase", by=(),
                     window=window)
    total = q.range("inference_requests_total", m, view, fn="increase", by=(), window=window)
    if total and not failed:  # no failure series at all: zero failures
        failed = [Line("failed", total[0].ts_ms, np.zeros_like(total[0].values))]
    lines = ratio_line("failure rate", failed, total, 100.0)
    return lines_figure(lines, empty_text=hint(view, INFERENCE_HINT), y_title="% of finished requests",
                        thresholds=[(t.failure_rate * 100, f"alert at {t.failure_rate:.1%}")])


def utilization(ctx: PanelContext, view: View) -> Figure:
    q, t = ctx.queries, ctx.sources.targets
    g = q.gpu_matchers(view.filters)
    window = q.window_for("gpu_utilization_ratio", g, view, traces=3)
    lines = []
    for how in ("avg", "min", "max"):
        for line in q.range("gpu_utilization_ratio", g, view, by=(), combine=how, window=window):
            lines.append(Line({"avg": "mean"}.get(how, how), line.ts_ms, line.values))
    return lines_figure(lines, empty_text=hint(view, GPU_HINT), y_title="utilization %", scale=100.0, dashed=("min", "max"),
                        thresholds=[(t.utilization_target, f"target {t.utilization_target:.0%}")])


def alerts(ctx: PanelContext, view: View) -> html.Div:
    rows = alert_reads.active_alerts(ctx.sources, view.filters, view.now_ms)
    if rows is None:
        return message(RULES_HINT)
    shown = [r for r in rows if r.state in ("firing", "pending")]
    return alerts_table(shown, empty_text="no alert is firing or pending" + (f" for {view.filters.describe()}" if view.filters.active else ""),
                        runbooks=False)


def register(app: Dash, ctx: PanelContext) -> None:
    graph_panel(app, ctx, KPIS, lambda v: kpis(ctx, v))
    graph_panel(app, ctx, SPEND, lambda v: spend(ctx, v))
    graph_panel(app, ctx, BUDGET, lambda v: budget(ctx, v))
    graph_panel(app, ctx, TOKENS, lambda v: tokens(ctx, v))
    graph_panel(app, ctx, LATENCY, lambda v: latency(ctx, v))
    graph_panel(app, ctx, FAILURES, lambda v: failures(ctx, v))
    graph_panel(app, ctx, UTIL, lambda v: utilization(ctx, v))
    table_panel(app, ctx, ALERTS, lambda v: alerts(ctx, v))


PAGE = Page("dashboard.pages.overview", "/", "Overview", 0, PANELS, register)
