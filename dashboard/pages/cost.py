"""Cost: spend by model, node, GPU type and tenant; idle cost; cost per 1M tokens over time;
forecast vs budget with the projected crossing time; the prices in effect."""

from __future__ import annotations

from collections.abc import Sequence

from dash import Dash, html

from dashboard import cost_reads, moe_reads
from dashboard.figures.breakdown import spend_bars_figure
from dashboard.figures.common import Figure, note, state_of
from dashboard.figures.series import add_thresholds, forecast_figure, lines_figure
from dashboard.model import Bar, Line
from dashboard.pages import overview
from dashboard.pages.common import FORECAST_HINT, LEDGER_HINT, LIVE_COST_HINT, Page, hint
from dashboard.pages.cost_editor import editor_layout, register_editor
from dashboard.panel import Panel, PanelContext, graph_panel, graph_panels, table_panel
from dashboard.queries import NODE_GPU_SOURCE, View, one_of
from dashboard.tables import prices_tables
from store.series_index import Matcher

BY_MODEL = Panel("cost-by-model", "Spend by model (in range)")
BY_NODE = Panel("cost-by-node", "Spend by node (in range)")
BY_GPU = Panel("cost-by-gpu", "Spend by GPU type (in range)")
BY_TENANT = Panel("cost-by-tenant", "Spend by tenant (in range)")
IDLE = Panel("cost-idle", "Idle cost against total cost (trailing hour, $/h)")
PER_TOKEN = Panel("cost-per-token", "Cost per 1M generated tokens, with its forecast")
BUDGET = Panel("cost-budget", "Spend vs budget with the forecast and the projected crossing")
MOE_IDLE = Panel("cost-moe-idle", "Idle MoE expert capacity by model (in range, estimate)")
PRICES = Panel("cost-prices", "Prices in effect", kind="table", wide=True)
PANELS = (BY_MODEL, BY_NODE, BY_GPU, BY_TENANT, IDLE, PER_TOKEN, BUDGET, MOE_IDLE, PRICES)
DIMENSION_OF = {BY_MODEL.id: "model", BY_NODE.id: "node", BY_GPU.id: "gpu_model", BY_TENANT.id: "tenant"}
TENANT_HINT = " (tenants appear where the inference servers' token series carry a tenant label)"


def price_notes(ctx: PanelContext) -> list[str]:
    """Which prices in use are examples the user has not set (CPU node-hour, '*' GPU placeholder)."""
    q = ctx.queries
    return cost_reads.example_price_notes(ctx.sources.price_book(), cpu_nodes=len(q.cpu_nodes()), gpus=q.exists(NODE_GPU_SOURCE))


def breakdown(ctx: PanelContext, view: View) -> Sequence[Figure]:
    panels = (BY_MODEL, BY_NODE, BY_GPU, BY_TENANT)
    found = cost_reads.spend_breakdown(ctx.sources, view.start_ms, view.now_ms, view.filters)
    if found is None:
        return [spend_bars_figure([], empty_text=LEDGER_HINT) for _ in panels]
    out = []
    for panel in panels:
        extra = TENANT_HINT if panel is BY_TENANT else ""
        out.append(spend_bars_figure(found[DIMENSION_OF[panel.id]], empty_text=hint(view, LEDGER_HINT) + extra))
    if state_of(out[0]) == "data":  # the page's first panel says when its dollars come from example prices
        for text in price_notes(ctx):
            note(out[0], text)
    return out


def scope_matchers(view: View) -> tuple[Matcher, ...]:
    if view.filters.models:
        return (Matcher("scope", "=", "model"), one_of("model", view.filters.models))
    return (Matcher("scope", "=", "fleet"),)


def idle(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    m = scope_matchers(view)
    window = q.window_for("infermeter_cost_dollars_per_hour", m, view, traces=2)
    lines: list[Line] = []
    for metric, what in (("infermeter_cost_dollars_per_hour", "total"), ("infermeter_idle_cost_dollars_per_hour", "idle")):
        for line in q.range(metric, m, view, by=(), window=window):
            lines.append(Line(what, line.ts_ms, line.values))
    figure = lines_figure(lines, empty_text=hint(view, LIVE_COST_HINT), y_title="$ per hour", y_format="$,.2f")
    found = cost_reads.spend_breakdown(ctx.sources, view.start_ms, view.now_ms, view.filters)
    if figure["data"] and found:
        total = sum(b.value for b in found["model"])
        idle_dollars = sum(b.value for b in found["model"] if b.group == "idle")
        if total > 0:
            note(figure, f"in this range: ${idle_dollars:,.2f} idle of ${total:,.2f} ({idle_dollars / total:.1%})")
    return figure


def per_token(ctx: PanelContext, view: View) -> Figure:
    q, src = ctx.queries, ctx.sources
    m: tuple[Matcher, ...] = (Matcher("scope", "=", "model"), one_of("model", view.filters.models)) if view.filters.models else ()
    lines = q.range("infermeter_cost_per_million_tokens_dollars", m, view, by=("scope", "model"), combine="avg",
                    name=lambda labels: labels.get("model") or "fleet")
    points, why = cost_reads.latest_forecast(src, "cost_per_mtok", view.filters)
    band = cost_reads.forecast_band(points, view.now_ms) if points is not None else None
    figure = forecast_figure(lines, band, empty_text=hint(view, LIVE_COST_HINT), no_forecast_text=why or FORECAST_HINT,
                             y_title="$ per 1M tokens", y_format="$,.3f")
    budget = cost_reads.unit_budget(src.price_book(), view.filters)
    if budget is not None and budget.cost_per_million_tokens and figure["data"]:
        scope = f"model {budget.model}" if budget.scope == "model" else "fleet"
        add_thresholds(figure, [(budget.cost_per_million_tokens, f"{scope} budget ${budget.cost_per_million_tokens:g}")])
    return figure


def moe_idle(ctx: PanelContext, view: View) -> Figure:
    """Each MoE model's spend split into the share its expert imbalance leaves idle and the rest
    (see dashboard.moe_reads for the estimate)."""
    share = moe_reads.idle_capacity(moe_reads.layer_loads(ctx, view))
    if not share:
        return spend_bars_figure([], empty_text=moe_reads.MOE_HINT)
    dollars = moe_reads.idle_dollars(ctx, view, share)
    if dollars is None:
        return spend_bars_figure([], empty_text=LEDGER_HINT)
    bars = []
    for model, (spend, idle_part) in dollars.items():
        bars += [Bar(model or "?", idle_part, "idle expert capacity"), Bar(model or "?", spend - idle_part, "experts busy")]
    figure = spend_bars_figure(bars, empty_text=hint(view, LEDGER_HINT))
    if state_of(figure) == "data":
        note(figure, "busiest expert sets the pace of an expert-parallel step: 1 − mean/max per layer is idle")
    return figure


def prices(ctx: PanelContext, view: View) -> html.Div:
    cost = ctx.sources.price_book()
    return prices_tables(cost_reads.price_rows(cost, view.now_ms), cost.currency, price_notes(ctx))


def register(app: Dash, ctx: PanelContext) -> None:
    graph_panels(app, ctx, (BY_MODEL, BY_NODE, BY_GPU, BY_TENANT), lambda v: breakdown(ctx, v))
    graph_panel(app, ctx, IDLE, lambda v: idle(ctx, v))
    graph_panel(app, ctx, PER_TOKEN, lambda v: per_token(ctx, v))
    graph_panel(app, ctx, BUDGET, lambda v: overview.budget(ctx, v))
    graph_panel(app, ctx, MOE_IDLE, lambda v: moe_idle(ctx, v))
    table_panel(app, ctx, PRICES, lambda v: prices(ctx, v))
    register_editor(app, ctx)


PAGE = Page("dashboard.pages.cost", "/cost", "Cost", 3, PANELS, register,
            intro="Spend comes from the hourly cost ledger; $/h and per-token lines from the live cost series (each minute).",
            extra=editor_layout)
