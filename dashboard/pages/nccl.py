"""NCCL: bus bandwidth per operation and message size, bandwidth over time, timeouts, warnings.

The model filter does not apply here (collectives carry no model); the node filter selects the
NCCL sources by the node of their ``instance``."""

from __future__ import annotations

from dash import Dash

from dashboard.figures.breakdown import size_figure
from dashboard.figures.common import Figure
from dashboard.figures.series import lines_figure
from dashboard.model import Line, SizePoint
from dashboard.pages.common import NCCL_HINT, Page, window_mean
from dashboard.panel import Panel, PanelContext, graph_panel
from dashboard.queries import Filters, View, one_of
from store.series_index import Matcher

BY_SIZE = Panel("nccl-size", "Bus bandwidth by operation and message size (mean over range)")
OVER_TIME = Panel("nccl-time", "Bus bandwidth by operation over time (Inspector)")
TIMEOUTS = Panel("nccl-timeouts", "Timeouts per step (PyTorch NCCL watchdog)")
WARNINGS = Panel("nccl-warnings", "NCCL warnings per step by source")
PANELS = (BY_SIZE, OVER_TIME, TIMEOUTS, WARNINGS)
SOURCES = (("nccl_collective_bus_bandwidth_bytes_per_second", "Inspector"), ("nccl_tests_bus_bandwidth_bytes_per_second", "nccl-tests"))
GB = 1e-9


def matchers(ctx: PanelContext, metric: str, filters: Filters) -> tuple[Matcher, ...] | None:
    if not filters.nodes:
        return ()
    wanted = set(filters.nodes)
    instances = {k.get("instance") for k in ctx.queries.keys(metric)}
    chosen = [i for i in instances if i and ctx.sources.node_of(i) in wanted]
    return (one_of("instance", chosen),) if chosen else None


def empty_text(ctx: PanelContext, view: View, what: str) -> str:
    if not any(ctx.queries.exists(name) for name, _ in SOURCES) and not ctx.queries.exists("nccl_warnings_total"):
        return NCCL_HINT
    return f"no {what} in this range" + (f" for {view.filters.describe()}" if view.filters.nodes else "")


def by_size(ctx: PanelContext, view: View) -> Figure:
    points = []
    for metric, source in SOURCES:
        lines = ctx.queries.range(metric, matchers(ctx, metric, view.filters), view, by=("op", "size_bytes"), combine="avg")
        for line in lines:
            mean = window_mean(line)
            try:
                size = float(line.labels.get("size_bytes", ""))
            except ValueError:
                continue
            if mean == mean and size > 0:
                points.append(SizePoint(f"{line.labels.get('op', '?')} ({source})", size, mean))
    return size_figure(points, y_title="GB/s", empty_text=empty_text(ctx, view, "bus bandwidth measurements"), scale=GB)


def over_time(ctx: PanelContext, view: View) -> Figure:
    metric = SOURCES[0][0]
    lines = ctx.queries.range(metric, matchers(ctx, metric, view.filters), view, by=("op",), combine="avg")
    return lines_figure(lines, empty_text=empty_text(ctx, view, "NCCL Inspector bandwidth"), y_title="GB/s", scale=GB)


def counted(ctx: PanelContext, view: View, metric: str, by: tuple[str, ...], what: str, unit: str) -> Figure:
    lines = ctx.queries.range(metric, matchers(ctx, metric, view.filters), view, fn="increase", by=by)
    if lines and not any(line.has_data() and float(max(line.values[line.values == line.values], default=0)) > 0 for line in lines):
        return lines_figure([], empty_text=f"no {what} in this range")
    named = [Line(line.name or "all", line.ts_ms, line.values) for line in lines]
    return lines_figure(named, empty_text=empty_text(ctx, view, what), y_title=unit, kind="bars")


def register(app: Dash, ctx: PanelContext) -> None:
    graph_panel(app, ctx, BY_SIZE, lambda v: by_size(ctx, v))
    graph_panel(app, ctx, OVER_TIME, lambda v: over_time(ctx, v))
    graph_panel(app, ctx, TIMEOUTS, lambda v: counted(ctx, v, "nccl_timeouts_total", ("op",), "NCCL timeouts", "timeouts"))
    graph_panel(app, ctx, WARNINGS, lambda v: counted(ctx, v, "nccl_warnings_total", ("source",), "NCCL warnings", "warnings"))


PAGE = Page("dashboard.pages.nccl", "/nccl", "NCCL", 4, PANELS, register,
            intro="Collective bandwidth from NCCL Inspector and nccl-tests; timeouts and warnings from the logs. "
                  "The model filter does not apply to this page.")
