"""Time-series figures: lines, stacked areas and bars over time, forecasts with their bands,
and cumulative spend against a budget with the projected crossing."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np

from dashboard.figures.common import (
    BAD,
    MUTED,
    WARN,
    Figure,
    base_layout,
    colour,
    compact,
    empty,
    note,
    stamps,
)
from dashboard.model import Band, BudgetLine, Crossing, Line

Kind = Literal["lines", "area", "bars"]
LEGEND_MAX = 16  # more traces than this: no legend (hover still names each one)


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def sparse(values: np.ndarray) -> bool:
    """True when the series was sampled more coarsely than the step (most values stand alone
    between gaps): its points are then joined, else a line of isolated points draws nothing."""
    finite = np.isfinite(values)
    count = int(finite.sum())
    if count < 2:
        return False
    alone = finite & ~np.concatenate([finite[1:], [False]]) & ~np.concatenate([[False], finite[:-1]])
    return int(alone.sum()) > count // 2


def _trace(line: Line, i: int, kind: Kind, scale: float, dashed: bool, show_legend: bool) -> dict[str, Any]:
    values = line.values * scale if scale != 1.0 else line.values
    trace: dict[str, Any] = {
        "type": "bar" if kind == "bars" else "scatter",
        "name": line.name,
        "x": stamps(line.ts_ms),
        "y": compact(values),
        "showlegend": show_legend,
    }
    if line.group:
        trace["legendgroup"] = line.group
    if kind == "bars":
        trace["marker"] = {"color": colour(i)}
    else:
        # a lone point (one hour of spend, the hour in progress) draws nothing as a line
        trace["mode"] = "lines+markers" if int(np.isfinite(line.values).sum()) == 1 else "lines"
        if sparse(line.values):
            trace["connectgaps"] = True
        trace["line"] = {"width": 1.5, "color": colour(i), **({"dash": "dash"} if dashed else {})}
        if kind == "area":
            trace["stackgroup"] = "one"
    return trace


def lines_figure(
    lines: Sequence[Line],
    *,
    empty_text: str,
    y_title: str = "",
    y_format: str = "",
    kind: Kind = "lines",
    scale: float = 1.0,
    dashed: Collection[str] = (),
    thresholds: Sequence[tuple[float, str]] = (),
    height: int = 300,
) -> Figure:
    """One trace per line; ``thresholds`` are horizontal reference lines (value, label)."""
    drawn = [line for line in lines if line.has_data()]
    if not drawn:
        return empty(empty_text, height)
    show_legend = len(drawn) <= LEGEND_MAX
    data = [_trace(line, i, kind, scale, line.name in dashed, show_legend) for i, line in enumerate(drawn)]
    layout = base_layout(y_title=y_title, y_format=y_format, height=height)
    if kind == "bars":
        layout["barmode"] = "stack"
        layout["bargap"] = 0.1
    return add_thresholds({"data": data, "layout": layout}, thresholds, scale)


def add_thresholds(figure: Figure, thresholds: Sequence[tuple[float, str]], scale: float = 1.0) -> Figure:
    """Horizontal reference lines (value, label), e.g. an SLA or an alert's threshold."""
    layout = figure["layout"]
    for value, label in thresholds:
        layout.setdefault("shapes", []).append(
            {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": value * scale, "y1": value * scale,
             "line": {"color": BAD, "width": 1, "dash": "dot"}})
        layout.setdefault("annotations", []).append(
            {"text": label, "xref": "paper", "x": 1, "xanchor": "right", "y": value * scale, "yanchor": "bottom",
             "showarrow": False, "font": {"size": 10, "color": BAD}})
    return figure


def _band_traces(band: Band, scale: float = 1.0) -> list[dict[str, Any]]:
    x = stamps(band.ts_ms)

    def edge(values: np.ndarray, name: str, fill: str | None, rgba: str) -> dict[str, Any]:
        trace: dict[str, Any] = {"type": "scatter", "mode": "lines", "name": name, "x": x, "y": compact(values * scale),
                                 "line": {"width": 0, "color": rgba}, "showlegend": fill is not None, "hoverinfo": "skip"}
        if fill:
            trace.update(fill=fill, fillcolor=rgba)
        return trace

    held = band.coverage or {}

    def name(level: int) -> str:
        return f"{level} % interval" + (f" (held {held[level]:.0%} in backtest)" if level in held else "")

    tip = "<br>".join(f"{lv} % band held {c:.0%} of actuals in backtest" for lv, c in sorted(held.items()))
    mean: dict[str, Any] = {"type": "scatter", "mode": "lines", "name": band.label, "x": x,
                            "y": compact(band.mean * scale), "line": {"width": 2, "color": "#1f77b4", "dash": "dash"}}
    if tip:
        mean["hovertemplate"] = f"%{{y}}<br>{tip}<extra>{band.label}</extra>"
    return [
        edge(band.lo95, name(95), None, "rgba(31,119,180,0.12)"),
        edge(band.hi95, name(95), "tonexty", "rgba(31,119,180,0.12)"),
        edge(band.lo80, name(80), None, "rgba(31,119,180,0.25)"),
        edge(band.hi80, name(80), "tonexty", "rgba(31,119,180,0.25)"),
        mean,
    ]


def forecast_figure(
    history: Sequence[Line],
    band: Band | None,
    *,
    empty_text: str,
    no_forecast_text: str,
    y_title: str = "",
    y_format: str = "",
    height: int = 300,
) -> Figure:
    """History as solid lines, then the forecast's mean (dashed) inside its 80 / 95 % bands."""
    drawn = [line for line in history if line.has_data()]
    if not drawn and band is None:
        return empty(f"{empty_text} {no_forecast_text}", height)
    data = [_trace(line, i, "lines", 1.0, False, True) for i, line in enumerate(drawn)]
    layout = base_layout(y_title=y_title, y_format=y_format, height=height)
    figure = {"data": data, "layout": layout}
    if band is None:
        return note(figure, no_forecast_text)
    data.extend(_band_traces(band))
    layout.setdefault("shapes", []).append(_vline(int(band.ts_ms[0]), MUTED))
    if not drawn:
        note(figure, empty_text)
    return figure


def _vline(at_ms: int, colour_: str) -> dict[str, Any]:
    return {"type": "line", "xref": "x", "yref": "paper", "x0": at_ms, "x1": at_ms, "y0": 0, "y1": 1,
            "line": {"color": colour_, "width": 1, "dash": "dot"}}


def budget_figure(
    actual: Line | None,
    path: Band | None,
    budget: BudgetLine | None,
    crossing: Crossing | None,
    *,
    empty_text: str,
    no_forecast_text: str,
    no_budget_text: str,
    height: int = 300,
) -> Figure:
    """Cumulative spend of the budget period, the forecast path ahead, the budget and the
    projected crossing (mean: red, upper 80 %: orange)."""
    has_actual = actual is not None and actual.has_data()
    if not has_actual and path is None:
        return empty(empty_text if budget is not None else f"{empty_text} {no_budget_text}", height)
    layout = base_layout(y_title="$ spent in period", y_format="$,.2f", height=height)
    data: list[dict[str, Any]] = []
    if actual is not None and has_actual:
        data.append({"type": "scatter", "mode": "lines", "name": actual.name, "x": stamps(actual.ts_ms),
                     "y": compact(actual.values, 6), "line": {"width": 2, "color": "#444"}})
    if path is not None:
        data.extend(_band_traces(path)[2:])  # the 80 % band and the mean path
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    if budget is not None:
        shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": budget.amount, "y1": budget.amount,
                       "line": {"color": BAD, "width": 1.5, "dash": "dot"}})
        notes.append({"text": f"{budget.label}: ${budget.amount:,.2f}", "xref": "paper", "x": 0, "xanchor": "left",
                      "y": budget.amount, "yanchor": "bottom", "showarrow": False, "font": {"size": 10, "color": BAD}})
    if crossing is not None:
        for at, colour_, what in ((crossing.at_ms, BAD, "mean"), (crossing.upper_at_ms, WARN, "upper 80 %")):
            if at is None:
                continue
            shapes.append(_vline(at, colour_))
            notes.append({"text": f"{what} crosses {when(at)}", "x": at, "xref": "x", "yref": "paper", "y": 0.02,
                          "xanchor": "right", "showarrow": False, "textangle": -90, "font": {"size": 10, "color": colour_}})
    layout["shapes"], layout["annotations"] = shapes, notes
    figure: Figure = {"data": data, "layout": layout}
    if budget is None:
        note(figure, no_budget_text)
    if path is None:
        note(figure, no_forecast_text)
    elif crossing is not None:
        note(figure, crossing.message)
    return figure


__all__ = ["lines_figure", "forecast_figure", "budget_figure", "add_thresholds", "when", "LEGEND_MAX"]
