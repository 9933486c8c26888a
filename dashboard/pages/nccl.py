"""NCCL: bus bandwidth per operation and message size, bandwidth over time, every watchdog timeout
in range (with the ranks its desync report blames), timeouts and warnings per step.

The model filter does not apply here (collectives carry no model); the node filter selects the
NCCL sources by the node of their ``instance``. nccl-tests results are told apart by run
(``run``, ``nodes``, ``nranks`` labels), so a 1-node and a 2-node sweep are two traces."""

from __future__ import annotations

from collections.abc import Sequence

from dash import Dash, html

from dashboard.figures.breakdown import size_figure
from dashboard.figures.common import Figure
from dashboard.figures.series import lines_figure
from dashboard.model import Line, SizePoint
from dashboard.pages.common import NCCL_HINT, Page, window_mean
from dashboard.panel import Panel, PanelContext, graph_panel, table_panel
from dashboard.queries import NCCL_TIMEOUT_EVENTS, Filters, Labels, View, one_of
from dashboard.tables import table, when
from store.series_index import Matcher

BY_SIZE = Panel("nccl-size", "Bus bandwidth by operation and message size (mean over range)")
OVER_TIME = Panel("nccl-time", "Bus bandwidth by operation over time (Inspector)")
TIMEOUT_EVENTS = Panel("nccl-timeout-events", "Watchdog timeouts in range (PyTorch NCCL), newest first", kind="table",
                       wide=True)
TIMEOUTS = Panel("nccl-timeouts", "Timeouts per step (PyTorch NCCL watchdog)")
WARNINGS = Panel("nccl-warnings", "NCCL warnings per step by source")
PANELS = (BY_SIZE, OVER_TIME, TIMEOUT_EVENTS, TIMEOUTS, WARNINGS)
INSPECTOR, NCCL_TESTS = "nccl_collective_bus_bandwidth_bytes_per_second", "nccl_tests_bus_bandwidth_bytes_per_second"
SOURCES = ((INSPECTOR, "Inspector"), (NCCL_TESTS, "nccl-tests"))
RUN_LABELS = ("run", "nodes", "nranks")  # what tells nccl-tests runs apart
GB = 1e-9
TIMEOUT_HEADER = ["read at (UTC)", "instance", "rank", "group", "op", "seq", "timeout", "ran for", "lagging ranks",
                  "logged"]


def matchers(ctx: PanelContext, metric: str, filters: Filters) -> tuple[Matcher, ...] | None:
    if not filters.nodes:
        return ()
    wanted = set(filters.nodes)
    instances = {k.get("instance") for k in ctx.queries.keys(metric)}
    chosen = [i for i in instances if i and ctx.sources.node_of(i) in wanted]
    return (one_of("instance", chosen),) if chosen else None


def empty_text(ctx: PanelContext, view: View, what: str) -> str:
    known = (*(name for name, _ in SOURCES), "nccl_warnings_total", "nccl_timeouts_total")
    if not any(ctx.queries.exists(name) for name in known):
        return NCCL_HINT
    return f"no {what} in this range" + (f" for {view.filters.describe()}" if view.filters.nodes else "")


def size_series(source: str, labels: Labels) -> str:
    """The trace of a bandwidth-by-size point: the operation and source, plus the run for nccl-tests."""
    name = f"{labels.get('op') or '?'} ({source}"
    run = labels.get("run", "")
    if source == "nccl-tests" and run:
        shape = ", ".join(f"{labels[k]} {word}{'' if labels[k] == '1' else 's'}"
                          for k, word in (("nodes", "node"), ("nranks", "rank")) if labels.get(k) not in (None, "", "unknown"))
        name += f" {run}" + (f": {shape}" if shape else "")
    return name + ")"


def by_size(ctx: PanelContext, view: View) -> Figure:
    points = []
    for metric, source in SOURCES:
        by = ("op", "size_bytes", *RUN_LABELS) if metric == NCCL_TESTS else ("op", "size_bytes")
        lines = ctx.queries.range(metric, matchers(ctx, metric, view.filters), view, by=by, combine="avg")
        for line in lines:
            mean = window_mean(line)
            try:
                size = float(line.labels.get("size_bytes", ""))
            except ValueError:
                continue
            if mean == mean and size > 0:
                points.append(SizePoint(size_series(source, line.labels), size, mean))
    return size_figure(points, y_title="GB/s", empty_text=empty_text(ctx, view, "bus bandwidth measurements"), scale=GB)


def over_time(ctx: PanelContext, view: View) -> Figure:
    metric = SOURCES[0][0]
    lines = ctx.queries.range(metric, matchers(ctx, metric, view.filters), view, by=("op",), combine="avg")
    return lines_figure(lines, empty_text=empty_text(ctx, view, "NCCL Inspector bandwidth"), y_title="GB/s", scale=GB)


def _seconds(ms: str | None) -> str:
    try:
        return f"{int(ms or '') / 1000:g} s"
    except ValueError:
        return "-"


def timeout_rows(events: Sequence[tuple[Labels, int]]) -> list[list[str]]:
    """Table rows of timeout events (labels, read-at ms), newest first. One timeout whose
    lagging ranks arrived in a later read is two series with the same identity: it is one row,
    with the ranks."""
    chosen: dict[tuple[str, ...], tuple[Labels, int]] = {}
    for labels, at_ms in events:
        identity = tuple(labels.get(k, "") for k in ("job", "instance", "rank", "pg", "op", "seq", "logged"))
        known = chosen.get(identity)
        if known is None or (labels.get("lagging_ranks") and not known[0].get("lagging_ranks")):
            chosen[identity] = (labels, min(at_ms, known[1]) if known else at_ms)
    rows = []
    def order(event: tuple[Labels, int]) -> tuple[int, str, int, str, str]:
        labels = event[0]
        rank = labels.get("rank", "")
        return -event[1], labels.get("instance", ""), int(rank) if rank.isdigit() else -1, labels.get("op", ""), \
            labels.get("seq", "")

    for labels, at_ms in sorted(chosen.values(), key=order):
        rows.append([when(at_ms), labels.get("instance") or "-", labels.get("rank") or "-", labels.get("pg") or "-",
                     labels.get("op") or "-", labels.get("seq") or "-", _seconds(labels.get("timeout_ms")),
                     _seconds(labels.get("ran_for_ms")), labels.get("lagging_ranks") or "-", labels.get("logged") or "-"])
    return rows


def timeout_events(ctx: PanelContext, view: View) -> html.Div:
    found = ctx.queries.nccl_timeout_events(matchers(ctx, NCCL_TIMEOUT_EVENTS, view.filters), view)
    rows = timeout_rows(found)
    caption = (f"{len(rows)} timeout{'s' if len(rows) != 1 else ''}; lagging ranks come from a TORCH_NCCL_DESYNC_DEBUG "
               "report, \"logged\" is the log line's own time (glog prints no year)")
    return table(TIMEOUT_HEADER, rows, empty_text=empty_text(ctx, view, "NCCL watchdog timeouts"), caption=caption)


def counted(ctx: PanelContext, view: View, metric: str, by: tuple[str, ...], what: str, unit: str) -> Figure:
    lines = ctx.queries.range(metric, matchers(ctx, metric, view.filters), view, fn="increase", by=by)
    if lines and not any(line.has_data() and float(max(line.values[line.values == line.values], default=0)) > 0 for line in lines):
        return lines_figure([], empty_text=f"no {what} in this range")
    named = [Line(line.name or "all", line.ts_ms, line.values) for line in lines]
    return lines_figure(named, empty_text=empty_text(ctx, view, what), y_title=unit, kind="bars")


def register(app: Dash, ctx: PanelContext) -> None:
    graph_panel(app, ctx, BY_SIZE, lambda v: by_size(ctx, v))
    graph_panel(app, ctx, OVER_TIME, lambda v: over_time(ctx, v))
    table_panel(app, ctx, TIMEOUT_EVENTS, lambda v: timeout_events(ctx, v))
    graph_panel(app, ctx, TIMEOUTS, lambda v: counted(ctx, v, "nccl_timeouts_total", ("op",), "NCCL timeouts", "timeouts"))
    graph_panel(app, ctx, WARNINGS, lambda v: counted(ctx, v, "nccl_warnings_total", ("source",), "NCCL warnings", "warnings"))


PAGE = Page("dashboard.pages.nccl", "/nccl", "NCCL", 4, PANELS, register,
            intro="Collective bandwidth from NCCL Inspector and nccl-tests (one trace per run); every watchdog timeout, "
                  "timeouts and warnings from the logs. The model filter does not apply to this page.")
