"""Panels: their boxes in a page's grid, and thin callbacks around the pure builders.

Every panel has its own callback, so one slow or failing panel neither blocks nor blanks the
others: an exception becomes an error figure (or message) in that panel, is logged once, and
counts in ``infermeter_dashboard_panel_errors_total{panel}``. Callback time is observed in
``infermeter_dashboard_callback_seconds{panel}``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from dash import Dash, Input, Output, State, dcc, html, no_update
from prometheus_client import CollectorRegistry, Counter, Histogram

from dashboard.figures.common import Figure, error, message_figure
from dashboard.figures.markers import with_markers
from dashboard.queries import Filters, SeriesQueries, View
from dashboard.settings import DashboardSettings
from dashboard.sources import Sources
from dashboard.tables import message
from dashboard.window import parse_range

log = logging.getLogger(__name__)
T = TypeVar("T")

RANGE_ID, MODEL_ID, NODE_ID, REFRESH_ID = "dash-range", "dash-model", "dash-node", "dash-refresh"
CONTROL_INPUTS = [Input(RANGE_ID, "value"), Input(MODEL_ID, "value"), Input(NODE_ID, "value"), Input(REFRESH_ID, "n_intervals")]
GRAPH_CONFIG: Any = {"displaylogo": False, "displayModeBar": False}


@dataclass(frozen=True)
class Panel:
    id: str
    title: str
    kind: Literal["graph", "table"] = "graph"
    wide: bool = False
    height: int = 300


def loading_figure(height: int) -> Figure:
    return message_figure("loading…", state="loading", height=height)


def digest_id(panel_id: str) -> str:
    """The store holding a digest of the figure a graph panel shows (see :func:`graph_panel`)."""
    return f"{panel_id}-digest"


def figure_digest(figure: Figure) -> str:
    return hashlib.blake2b(json.dumps(figure, separators=(",", ":"), default=str).encode(), digest_size=16).hexdigest()


def panel_box(panel: Panel) -> html.Div:
    if panel.kind == "graph":
        body: Any = [dcc.Graph(id=panel.id, figure=loading_figure(panel.height), config=GRAPH_CONFIG),
                     dcc.Store(id=digest_id(panel.id))]
    else:
        body = html.Div(id=panel.id, children=message("loading…", "loading"))
    style: dict[str, Any] = {"background": "white", "border": "1px solid #e3e3e3", "borderRadius": "6px", "padding": "8px 10px",
                             "minWidth": "0"}
    if panel.wide:
        style["gridColumn"] = "1 / -1"
    return html.Div([html.H3(panel.title, style={"fontSize": "14px", "margin": "0 0 6px", "fontWeight": "600"}),
                     *(body if isinstance(body, list) else [body])],
                    className="panel", id=f"{panel.id}-box", style=style)


def grid(panels: Sequence[Panel], intro: str = "") -> html.Div:
    children: list[Any] = []
    if intro:
        children.append(html.P(intro, style={"color": "#666", "fontSize": "13px", "margin": "0 0 8px", "gridColumn": "1 / -1"}))
    children.extend(panel_box(p) for p in panels)
    return html.Div(children, style={"display": "grid", "gridTemplateColumns": "repeat(auto-fill, minmax(520px, 1fr))",
                                     "gap": "12px"})


@dataclass
class PanelMetrics:
    seconds: Histogram
    errors: Counter

    @classmethod
    def register(cls, registry: CollectorRegistry) -> PanelMetrics:
        return cls(
            Histogram("infermeter_dashboard_callback_seconds", "Server time of a dashboard panel's callback.", ["panel"],
                      buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5), registry=registry),
            Counter("infermeter_dashboard_panel_errors_total", "Dashboard panels that failed to build.", ["panel"],
                    registry=registry),
        )


@dataclass
class PanelContext:
    """What every panel callback gets: the sources, the series queries and the settings."""

    sources: Sources
    settings: DashboardSettings
    metrics: PanelMetrics | None = None
    queries: SeriesQueries = field(init=False)
    _failing: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.queries = SeriesQueries(self.sources.reader, self.sources.node_of, self.sources.promql)

    def view(self, range_value: object, models: object, nodes: object) -> View:
        return View(self.sources.clock.now_ms(), parse_range(range_value, self.settings.default_range),
                    Filters.of(models, nodes), self.settings.max_points_per_trace)

    def markers(self, view: View) -> list[Any]:
        """The change markers in the view's range (for its one selected model, else all)."""
        read = self.sources.markers
        if read is None:
            return []
        model = view.filters.models[0] if len(view.filters.models) == 1 else None
        return read(view.start_ms, view.now_ms, model)

    def run(self, panel_id: str, build: Callable[[], T], fail: Callable[[str], T]) -> T:
        started = time.perf_counter()
        try:
            result = build()
            self._failing.discard(panel_id)
        except Exception as exc:  # one panel's failure stays in that panel
            text = f"this panel failed: {type(exc).__name__}: {exc}"
            if panel_id not in self._failing:
                log.exception("dashboard panel %s failed", panel_id)
                self._failing.add(panel_id)
            if self.metrics is not None:
                self.metrics.errors.labels(panel_id).inc()
            result = fail(text)
        if self.metrics is not None:
            self.metrics.seconds.labels(panel_id).observe(time.perf_counter() - started)
        return result


def _unless_shown(figures: Sequence[Figure], shown: Sequence[object]) -> list[Any]:
    """Figures then their digests, with ``no_update`` for each figure the browser already shows:
    a live refresh whose data did not change sends nothing and redraws nothing."""
    digests = [figure_digest(f) for f in figures]
    fresh = [d != s for d, s in zip(digests, shown)]
    return ([f if new else no_update for f, new in zip(figures, fresh)]
            + [d if new else no_update for d, new in zip(digests, fresh)])


def graph_panel(app: Dash, ctx: PanelContext, panel: Panel, build: Callable[[View], Figure]) -> None:
    def update(range_value: object, models: object, nodes: object, _n: object, shown: object) -> list[Any]:
        view = ctx.view(range_value, models, nodes)
        figure = ctx.run(panel.id, lambda: with_markers(build(view), ctx.markers(view)),
                         lambda text: error(text, panel.height))
        return _unless_shown([figure], [shown])

    app.callback([Output(panel.id, "figure"), Output(digest_id(panel.id), "data")], *CONTROL_INPUTS,
                 State(digest_id(panel.id), "data"))(update)


def table_panel(app: Dash, ctx: PanelContext, panel: Panel, build: Callable[[View], Any]) -> None:
    def update(range_value: object, models: object, nodes: object, _n: object) -> Any:
        view = ctx.view(range_value, models, nodes)
        return ctx.run(panel.id, lambda: build(view), lambda text: message(text, "error"))

    app.callback(Output(panel.id, "children"), *CONTROL_INPUTS)(update)


def graph_panels(app: Dash, ctx: PanelContext, panels: Sequence[Panel], build: Callable[[View], Sequence[Figure]]) -> None:
    """Several graphs from one read (e.g. spend by model, node, GPU type and tenant)."""
    key = "+".join(p.id for p in panels)

    def update(range_value: object, models: object, nodes: object, _n: object, *shown: object) -> list[Any]:
        view = ctx.view(range_value, models, nodes)
        figures = ctx.run(key, lambda: [with_markers(f, ctx.markers(view)) for f in build(view)],
                          lambda text: [error(text, p.height) for p in panels])
        return _unless_shown(figures, shown)

    app.callback([Output(p.id, "figure") for p in panels] + [Output(digest_id(p.id), "data") for p in panels],
                 *CONTROL_INPUTS, *[State(digest_id(p.id), "data") for p in panels])(update)


def table_panels(app: Dash, ctx: PanelContext, panels: Sequence[Panel], build: Callable[[View], Sequence[Any]]) -> None:
    """Several tables from one read (the Drift page's table and its changes)."""
    key = "+".join(p.id for p in panels)

    def update(range_value: object, models: object, nodes: object, _n: object) -> list[Any]:
        view = ctx.view(range_value, models, nodes)
        return ctx.run(key, lambda: list(build(view)), lambda text: [message(text, "error") for _ in panels])

    app.callback([Output(p.id, "children") for p in panels], *CONTROL_INPUTS)(update)


__all__ = ["Panel", "PanelContext", "PanelMetrics", "grid", "graph_panel", "table_panel", "graph_panels", "table_panels",
           "CONTROL_INPUTS",
           "RANGE_ID", "MODEL_ID", "NODE_ID", "REFRESH_ID", "loading_figure"]
