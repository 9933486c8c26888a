"""Drift: one row per node with the driver, CUDA, NVML, VBIOS, NCCL and engine versions and the
watched NCCL / PyTorch settings it reported last in the range, values that differ from the rest
of the nodes marked; below, every version or setting that changed on a node within the range."""

from __future__ import annotations

from dash import Dash, html

from dashboard.pages.common import Page
from dashboard.panel import Panel, PanelContext, table_panels
from dashboard.queries import View
from dashboard.tables import table, when
from drift.table import Span, changes, drift_table, history, latest

TABLE = Panel("drift-table", "Versions and NCCL settings per node (the last reported in range; odd values marked)",
              kind="table", wide=True)
CHANGES = Panel("drift-changes", "Changes on a node within the range (upgrades, changed settings)", kind="table", wide=True)
PANELS = (TABLE, CHANGES)
ODD = {"background": "#fde2e1", "color": "#8a1c13", "fontWeight": "600", "padding": "0 4px"}
DRIFT_HINT = ("no version series in this range: they come from NVML (gpu.nvml), NCCL and PyTorch logs (nccl.paths) and "
              "the engines' own version endpoints (scrape.targets)")


def _spans(ctx: PanelContext, view: View) -> list[Span]:
    spans = history(ctx.sources.reader, view.start_ms, view.now_ms)
    if view.filters.nodes:
        wanted = set(view.filters.nodes)
        spans = [s for s in spans if s.node in wanted]
    return spans


def drift_view(spans: list[Span]) -> tuple[list[str], list[list[object]], int]:
    """Header, rows (odd cells as marked spans) and how many cells are odd."""
    t = drift_table(latest(spans))
    clusters = {c for c, _ in t.rows} - {""}
    header = [*(["cluster"] if clusters else []), "node", *t.columns]
    rows: list[list[object]] = []
    for (cluster, node), cells in t.rows.items():
        row: list[object] = [cluster or "-"] if clusters else []
        row.append(node)
        for column in t.columns:
            value = cells.get(column, "-")
            if (cluster, node, column) in t.odd:
                common = t.intended[(cluster, column)]
                row.append(html.Span(value, style=ODD, title=f"most nodes: {common}"))
            else:
                row.append(value)
        rows.append(row)
    return header, rows, len(t.odd)


def drift_and_changes(ctx: PanelContext, view: View) -> list[html.Div]:
    """Both tables from one read of the info series."""
    spans = _spans(ctx, view)
    return [drift_panel(spans), changes_panel(spans)]


def drift_panel(spans: list[Span]) -> html.Div:
    header, rows, odd = drift_view(spans)
    caption = (f"{odd} value{'s' if odd != 1 else ''} differ from the rest of the nodes (marked; hover for the common "
               "value); 'unset': a watched setting the node never showed") if rows else ""
    return table(header, rows, empty_text=DRIFT_HINT, caption=caption)


def changes_panel(spans: list[Span]) -> html.Div:
    rows = [[when(s.first_ms), s.node, s.column, before.value, s.value] for before, s in changes(spans)]
    return table(["first seen (UTC)", "node", "component / setting", "before", "after"], rows[::-1],
                 empty_text="no version or setting changed on any node in this range")


def register(app: Dash, ctx: PanelContext) -> None:
    table_panels(app, ctx, (TABLE, CHANGES), lambda v: drift_and_changes(ctx, v))


PAGE = Page("dashboard.pages.drift", "/drift", "Drift", 6, PANELS, register,
            intro="Versions must match across the nodes of a group (driver, CUDA, NCCL, engine) and so should the NCCL "
                  "settings that fix timeouts; NodeSoftwareDrift and NcclSettingDrift alert on the odd node.")
