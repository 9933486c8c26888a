"""Releases: the deploy and config-change markers in range, and the newest one's windows before and
after it side by side (the comparison ``infermeter compare`` prints: means, change, 95 % interval,
p-value, verdict). The same markers are drawn on every time chart of the dashboard."""

from __future__ import annotations

import math

import numpy as np
from dash import Dash, html

from dashboard.pages.common import Page
from dashboard.panel import Panel, PanelContext, table_panel
from dashboard.queries import View
from dashboard.tables import table, when
from releases.windows import Windows, compare_windows, format_value

MARKERS = Panel("releases-markers", "Deploys and config changes in range (drawn on every time chart)", kind="table",
                wide=True)
COMPARE = Panel("releases-compare", "Before and after the newest change in range", kind="table", wide=True)
PANELS = (MARKERS, COMPARE)
MARKER_HINT = ("no deploy or config-change markers in this range: record them with `infermeter mark deploy --model M "
               "--version V` or POST /api/v1/events (operators)")
MIN_WINDOW_MS, MAX_WINDOW_MS, SETTLE_MS, STEP_MS = 15 * 60_000, 3_600_000, 5 * 60_000, 60_000
VERDICT = {"worse": {"color": "#8a1c13", "fontWeight": "600"}, "better": {"color": "#1e6b1e", "fontWeight": "600"}}


def markers_panel(ctx: PanelContext, view: View) -> html.Div:
    rows = [[when(m.at_ms), m.kind, m.model or "all", m.version or "-", m.node or "all", m.message or "-", m.actor]
            for m in reversed(ctx.markers(view))]
    return table(["at (UTC)", "kind", "model", "version", "node", "message", "by"], rows, empty_text=MARKER_HINT)


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:+.1%}"


def compare_panel(ctx: PanelContext, view: View) -> html.Div:
    found = ctx.markers(view)
    if not found:
        return table([], [], empty_text=MARKER_HINT)
    marker = found[-1]
    window = min(MAX_WINDOW_MS, view.now_ms - marker.at_ms - SETTLE_MS, marker.at_ms - view.start_ms)
    window -= window % STEP_MS
    if window < MIN_WINDOW_MS:
        return table([], [], empty_text=f"{marker.describe()} at {when(marker.at_ms)}: less than 15 minutes of data on "
                                        "one side of it in this range (widen the range, or wait)")
    source = ctx.queries.source
    windows = Windows(marker.at_ms, window, SETTLE_MS, STEP_MS)
    result = compare_windows(source, windows, np.random.default_rng(0), model=marker.model, node=marker.node,
                             marker=marker)
    rows = []
    for c in result.changes:
        interval = f"[{_pct(c.low)}, {_pct(c.high)}]" if math.isfinite(c.low) else "-"
        p = f"{c.p_value:.3f}" if math.isfinite(c.p_value) else "-"
        rows.append([c.title, format_value(c.before, c.unit), format_value(c.after, c.unit), _pct(c.change), interval, p,
                     html.Span(c.verdict, style=VERDICT.get(c.verdict, {}))])
    caption = (f"{marker.describe()} at {when(marker.at_ms)}: {window // 60_000} min before against {window // 60_000} "
               f"min after, skipping {SETTLE_MS // 60_000} min after the change; a change counts when its 95 % interval "
               "excludes 0 and p < 0.05 (both computed on blocks, as the values are autocorrelated)")
    return table(["quantity", "before", "after", "change", "95 % interval", "p", "verdict"], rows,
                 empty_text=MARKER_HINT, caption=caption)


def register(app: Dash, ctx: PanelContext) -> None:
    table_panel(app, ctx, MARKERS, lambda v: markers_panel(ctx, v))
    table_panel(app, ctx, COMPARE, lambda v: compare_panel(ctx, v))


PAGE = Page("dashboard.pages.releases", "/releases", "Releases", 7, PANELS, register,
            intro="Deploys and config changes (infermeter mark, POST /api/v1/events) and what changed around the newest "
                  "one; `infermeter compare --marker ID` compares any of them.")
