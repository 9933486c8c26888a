"""Alerts: firing, pending and resolved with runbook text; history; silences; plus the scale
recommendations and rules that fail to evaluate."""

from __future__ import annotations

from dash import Dash, html

from dashboard import alert_reads
from dashboard.pages.common import RULES_HINT, Page
from dashboard.panel import Panel, PanelContext, table_panel
from dashboard.queries import View
from dashboard.tables import alerts_table, history_table, message, problems_table, scale_table, silences_table

ACTIVE = Panel("alerts-active", "Firing, pending and recently resolved (runbooks fold out)", kind="table", wide=True)
HISTORY = Panel("alerts-history", "History (state transitions in range, newest first)", kind="table", wide=True)
SILENCES = Panel("alerts-silences", "Silences", kind="table", wide=True)
SCALE = Panel("alerts-scale", "Scale recommendations in range", kind="table")
PROBLEMS = Panel("alerts-problems", "Rules that fail to evaluate", kind="table")
PANELS = (ACTIVE, HISTORY, SILENCES, SCALE, PROBLEMS)


def _for(view: View) -> str:
    return f" for {view.filters.describe()}" if view.filters.active else ""


def active(ctx: PanelContext, view: View) -> html.Div:
    rows = alert_reads.active_alerts(ctx.sources, view.filters, view.now_ms)
    if rows is None:
        return message(RULES_HINT)
    counts = {s: sum(1 for r in rows if r.state == s) for s in ("firing", "pending", "resolved")}
    caption = ", ".join(f"{n} {s}" for s, n in counts.items())
    return alerts_table(rows, empty_text="no alert is firing, pending or recently resolved" + _for(view), caption=caption)


def history(ctx: PanelContext, view: View) -> html.Div:
    rows = alert_reads.history_rows(ctx.sources, view.start_ms, view.filters)
    if rows is None:
        return message(RULES_HINT)
    return history_table(rows, empty_text="no alert changed state in this range" + _for(view))


def silences(ctx: PanelContext, view: View) -> html.Div:
    rows = alert_reads.silence_rows(ctx.sources, view.now_ms)
    if rows is None:
        return message("notification is not running (notify: in the config), so there are no silences")
    return silences_table(rows, empty_text="no silences: create one with POST /api/v1/silences (Alertmanager's v2 shape)")


def scale(ctx: PanelContext, view: View) -> html.Div:
    rows = alert_reads.scale_rows(ctx.sources, view.start_ms, view.filters)
    if rows is None:
        return message(RULES_HINT)
    return scale_table(rows, empty_text="no scale recommendation in this range (QueueBacklog / QueueIdle did not fire)")


def problems(ctx: PanelContext, view: View) -> html.Div:
    rows = alert_reads.rule_problems(ctx.sources)
    if rows is None:
        return message(RULES_HINT)
    return problems_table(rows, empty_text="every rule evaluates")


def register(app: Dash, ctx: PanelContext) -> None:
    table_panel(app, ctx, ACTIVE, lambda v: active(ctx, v))
    table_panel(app, ctx, HISTORY, lambda v: history(ctx, v))
    table_panel(app, ctx, SILENCES, lambda v: silences(ctx, v))
    table_panel(app, ctx, SCALE, lambda v: scale(ctx, v))
    table_panel(app, ctx, PROBLEMS, lambda v: problems(ctx, v))


PAGE = Page("dashboard.pages.alerts", "/alerts", "Alerts", 8, PANELS, register)
