"""Pure builders of the table panels (alerts with runbooks, history, silences, prices): plain
rows in, Dash components out. Like the figures, each carries its state in its class
(``panel-data``, ``panel-empty``, ``panel-error``) so an empty state is told apart from a table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dash import html

from dashboard.model import AlertRow

STATE_COLOURS = {"silenced": "#7f7f7f", "firing": "#d62728", "pending": "#ff7f0e", "resolved": "#2ca02c", "active": "#d62728",
                 "expired": "#7f7f7f", "in effect": "#2ca02c", "scheduled": "#1f77b4", "superseded": "#7f7f7f"}
CELL = {"padding": "4px 8px", "borderBottom": "1px solid #eee", "textAlign": "left", "verticalAlign": "top", "fontSize": "13px"}
HEAD = {**CELL, "fontWeight": "600", "borderBottom": "2px solid #ccc", "whiteSpace": "nowrap"}


def when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def message(text: str, state: str = "empty") -> html.Div:
    colour = "#d62728" if state == "error" else "#777"
    return html.Div(text, className=f"panel-message panel-{state}", style={"color": colour, "padding": "16px 4px"})


def badge(text: str) -> html.Span:
    colour = STATE_COLOURS.get(text, "#555")
    return html.Span(text, style={"color": "white", "background": colour, "borderRadius": "3px", "padding": "1px 6px",
                                  "fontSize": "12px", "whiteSpace": "nowrap"})


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, empty_text: str, caption: str = "") -> html.Div:
    if not rows:
        return message(empty_text)
    head = html.Thead(html.Tr([html.Th(h, style=HEAD) for h in header]))
    body = html.Tbody([html.Tr([html.Td(cell, style=CELL) for cell in row]) for row in rows])
    children: list[Any] = []
    if caption:
        children.append(html.Div(caption, style={"color": "#777", "fontSize": "12px", "marginBottom": "4px"}))
    children.append(html.Table([head, body], style={"borderCollapse": "collapse", "width": "100%"}))
    return html.Div(children, className="panel-data", style={"overflowX": "auto", "maxHeight": "460px", "overflowY": "auto"})


def _value(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.4g}"


def _labels(labels: dict[str, str], skip: Sequence[str] = ("alertname", "severity")) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in skip)


def alerts_table(rows: Sequence[AlertRow], *, empty_text: str, runbooks: bool = True, caption: str = "") -> html.Div:
    """State, alert, severity, since, summary and labels; the runbook folds out under each."""
    out = []
    for r in rows:
        summary: list[Any] = [html.Div(r.summary)]
        if runbooks and r.runbook:
            summary.append(html.Details([html.Summary("runbook", style={"cursor": "pointer", "color": "#1f77b4"}),
                                         html.Pre(r.runbook, style={"whiteSpace": "pre-wrap", "fontSize": "12px", "margin": "4px 0"})]))
        state: Any = [badge(r.state), " ", badge("silenced")] if r.silenced else badge(r.state)
        out.append([state, html.B(r.name), r.severity, when(r.since_ms), summary, _labels(r.labels), _value(r.value)])
    return table(["state", "alert", "severity", "since (UTC)", "summary", "labels", "value"], out, empty_text=empty_text,
                 caption=caption)


def history_table(rows: Sequence[dict[str, Any]], *, empty_text: str) -> html.Div:
    out = []
    for r in rows:
        labels = r.get("labels") or {}
        name = labels.get("alertname") or str(r.get("rule", "")).split("/", 1)[-1]
        value = r.get("value")
        out.append([when(int(r["at_ms"])), name, f"{r.get('from')} → {r.get('to')}", _labels(labels),
                    "-" if value is None else f"{value:.4g}"])
    return table(["at (UTC)", "alert", "transition", "labels", "value"], out, empty_text=empty_text)


def silences_table(rows: Sequence[dict[str, Any]], *, empty_text: str) -> html.Div:
    out = [[badge(str(r["state"])), r["matchers"], when(int(r["starts_at_ms"])), when(int(r["ends_at_ms"])),
            r["created_by"], r["comment"], html.Code(str(r["id"])[:8])] for r in rows]
    return table(["state", "matchers", "starts (UTC)", "ends (UTC)", "by", "comment", "id"], out, empty_text=empty_text)


def scale_table(rows: Sequence[dict[str, Any]], *, empty_text: str) -> html.Div:
    out = [[when(int(r["at_ms"])), r["scope"], r["action"], f"{r['from_instances']} → {r['to_instances']}", r["reason"]]
           for r in rows]
    return table(["at (UTC)", "scope", "action", "instances", "reason"], out, empty_text=empty_text)


def problems_table(rows: Sequence[dict[str, Any]], *, empty_text: str) -> html.Div:
    out = [[r["rule"], r["error"], when(int(r["last_eval_ms"]))] for r in rows]
    return table(["rule", "error", "last evaluation (UTC)"], out, empty_text=empty_text)


def prices_tables(book: dict[str, list[list[str]]], currency: str, notes: Sequence[str] = ()) -> html.Div:
    """The price book's sections, each entry with the date it takes effect and its status;
    ``notes`` (prices that are examples, not the user's) first, highlighted."""
    sections = [
        ("GPU prices", ["GPU model", "purchase class", f"{currency}/GPU-hour", "from (UTC)", "status"], book.get("gpu", []), 4),
        ("Electricity", ["price", "from (UTC)", "status"], book.get("electricity", []), 2),
        ("Overhead", ["price", "from (UTC)", "status"], book.get("overhead", []), 2),
        ("Nodes", ["host (regex)", "purchase class", "model served"], book.get("nodes", []), None),
        ("Budgets", ["scope", "model", "per 1M tokens", "per period", "period"], book.get("budgets", []), None),
    ]
    children: list[Any] = [
        html.P(text, className="price-example", style={"background": "#fff4e0", "border": "1px solid #f0c36d",
                                                       "borderRadius": "4px", "padding": "6px 8px", "margin": "4px 0"})
        for text in notes
    ]
    for title, header, rows, status_col in sections:
        shown = [[badge(c) if i == status_col else c for i, c in enumerate(row)] for row in rows]
        hint = "none configured (cost.nodes)" if title == "Nodes" else "none configured (cost.budgets)" if title == "Budgets" else "none"
        children.append(html.H4(title, style={"margin": "10px 0 4px", "fontSize": "14px"}))
        children.append(table(header, shown, empty_text=hint))
    return html.Div(children, className="panel-data")


__all__ = ["message", "table", "alerts_table", "history_table", "silences_table", "scale_table", "problems_table",
           "prices_tables", "when"]
