"""MoE: expert utilization as a layer x expert heatmap over the range, the least balanced layers
with their figures (NeMo's definitions, see moe.balance), imbalance over time, the engines' own
expert-parallel balancedness, and the idle expert capacity that imbalance costs."""

from __future__ import annotations

import numpy as np
from dash import Dash, html

from dashboard.figures.common import Figure
from dashboard.figures.moe import expert_heatmap_figure
from dashboard.figures.series import add_thresholds, lines_figure
from dashboard.model import Line
from dashboard.moe_reads import MOE_HINT, LayerLoad, idle_capacity, idle_dollars, imbalance_steps, layer_loads
from dashboard.pages.common import Page
from dashboard.panel import Panel, PanelContext, graph_panel, graph_panels, table_panel
from dashboard.queries import View
from dashboard.tables import table

HEATMAP = Panel("moe-heatmap", "Expert utilization by layer: tokens routed in range over each expert's fair share",
                wide=True, height=360)
WORST = Panel("moe-worst", "Least balanced layers (in range)", kind="table", wide=True)
TREND = Panel("moe-trend", "Busiest expert over the mean, per step (the five least balanced layers)")
BALANCEDNESS = Panel("moe-ep", "Expert-parallel balancedness the engine reports (mean over max tokens per rank)")
PANELS = (HEATMAP, WORST, TREND, BALANCEDNESS)
WORST_HEADER = ["model", "layer", "experts", "tokens routed", "max / mean", "CV", "unused experts", "diversity",
                "JS from uniform"]
TOP = 5


def heatmap_and_trend(ctx: PanelContext, view: View) -> list[Figure]:
    """The heatmap and the trend from one read of the routing counts."""
    loads = layer_loads(ctx, view)
    return [heatmap(loads), trend(ctx, loads)]


def heatmap(loads: list[LayerLoad]) -> Figure:
    experts = sorted({e for ld in loads for e in ld.experts}, key=lambda e: (int(e) if e.isdigit() else 1 << 30, e))
    z = []
    for ld in loads:
        util = dict(zip(ld.experts, ld.balance.utilization))
        z.append([round(util[e], 3) if e in util else None for e in experts])
    return expert_heatmap_figure([ld.name for ld in loads], experts, z, empty_text=MOE_HINT)


def worst_rows(loads: list[LayerLoad], limit: int = 50) -> list[list[str]]:
    ranked = sorted(loads, key=lambda ld: -ld.balance.max_over_mean)[:limit]
    return [[ld.model or "-", ld.layer, str(ld.balance.experts), f"{ld.balance.tokens:,.0f}",
             f"{ld.balance.max_over_mean:.2f}", f"{ld.balance.cv:.2f}",
             f"{ld.balance.dead_fraction:.0%}" + (f" ({', '.join(map(str, _dead(ld)))})" if ld.balance.dead_experts else ""),
             f"{ld.balance.diversity:.2f}", f"{ld.balance.js_divergence:.3f}"] for ld in ranked]


def _dead(ld: LayerLoad) -> list[str]:
    return [ld.experts[i] for i in ld.balance.dead_experts][:8]


def worst(ctx: PanelContext, view: View) -> html.Div:
    loads = layer_loads(ctx, view)
    idle = idle_capacity(loads)
    dollars = idle_dollars(ctx, view, idle) if idle else None
    parts = []
    for model, share in sorted(idle.items()):
        text = f"{model or '?'}: {share:.0%} of expert capacity idle"
        if dollars is not None and dollars[model][0] > 0:
            spend, cost = dollars[model]
            text += f" ≈ ${cost:,.2f} of ${spend:,.2f} spent in range"
        parts.append(text)
    caption = ("Idle expert capacity (estimate: 1 − mean/max per layer, averaged; experts spread evenly over the "
               "expert-parallel ranks): " + "; ".join(parts)) if parts else ""
    return table(WORST_HEADER, worst_rows(loads), empty_text=MOE_HINT, caption=caption)


def trend(ctx: PanelContext, loads: list[LayerLoad]) -> Figure:
    loads = sorted(loads, key=lambda ld: -ld.balance.max_over_mean)[:TOP]
    lines = [imbalance_steps(ld) for ld in loads]
    figure = lines_figure(lines, empty_text=MOE_HINT, y_title="max / mean")
    return add_thresholds(figure, [(ctx.sources.targets.moe_max_over_mean, "alert")]) if lines else figure


def balancedness(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    matchers = q.inference_matchers("moe_balancedness_sum", view.filters)
    window = q.window_for("moe_balancedness_sum", matchers, view)
    sums = q.range("moe_balancedness_sum", matchers, view, fn="increase", by=("model",), window=window)
    counts = {line.name: line for line in q.range("moe_balancedness_count", matchers, view, fn="increase",
                                                  by=("model",), window=window)}
    lines = []
    for line in sums:
        count = counts.get(line.name)
        if count is None or len(count.values) != len(line.values):
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            lines.append(Line(line.name or "all", line.ts_ms, np.where(count.values > 0, line.values / count.values, np.nan)))
    return lines_figure(lines, empty_text="no balancedness reports in this range (vLLM logs EPLB steps with "
                        "eplb_config.log_balancedness; SGLang exports sglang:eplb_balancedness with "
                        "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC)", y_title="mean / max")


def register(app: Dash, ctx: PanelContext) -> None:
    graph_panels(app, ctx, (HEATMAP, TREND), lambda v: heatmap_and_trend(ctx, v))
    table_panel(app, ctx, WORST, lambda v: worst(ctx, v))
    graph_panel(app, ctx, BALANCEDNESS, lambda v: balancedness(ctx, v))


PAGE = Page("dashboard.pages.moe", "/moe", "MoE", 5, PANELS, register,
            intro="Tokens routed to each expert of each MoE layer (the reference worker's MoE mode, SGLang's expert "
                  "recorder): 1.0 is an expert's fair share; the alert fires when a layer's busiest expert stays above "
                  "its threshold for 10 minutes.")
