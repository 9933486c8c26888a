"""GPU figures: the utilization heatmap (GPU × time), load imbalance, per-GPU throughput
against its model's mean with outliers marked, and the XID / ECC event timeline."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from dashboard.figures.common import (
    BAD,
    MUTED,
    WARN,
    Figure,
    base_layout,
    category_margin,
    colour,
    compact,
    empty,
    stamps,
)
from dashboard.model import Bar, Event, Line


def heatmap_figure(
    rows: Sequence[Line], *, empty_text: str, scale: float = 100.0, z_title: str = "%", zmax: float = 100.0
) -> Figure:
    """One row per GPU, one column per step (all rows share the first row's steps)."""
    drawn = [row for row in rows if row.has_data()]
    if not drawn:
        return empty(empty_text)
    height = max(260, min(900, 14 * len(drawn) + 90))
    layout = base_layout(height=height)
    layout["hovermode"] = "closest"
    layout["yaxis"] = {"type": "category", "tickfont": {"size": 9}, "autorange": "reversed"}
    layout["margin"]["l"] = category_margin(row.name for row in drawn)
    trace = {
        "type": "heatmap",
        "x": stamps(drawn[0].ts_ms),
        "y": [row.name for row in drawn],
        "z": [compact(row.values * scale, 3) for row in drawn],
        "zmin": 0,
        "zmax": zmax,
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": z_title}, "thickness": 12},
        "hoverongaps": False,
    }
    return {"data": [trace], "layout": layout}


def _matrix(rows: Sequence[Line]) -> np.ndarray:
    width = max(len(row.values) for row in rows)
    out = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        out[i, : len(row.values)] = row.values
    return out


def imbalance_figure(rows: Sequence[Line], *, high: float, low: float, empty_text: str) -> Figure:
    """Across GPUs per step: max, mean and min utilization, and how many GPUs sit above
    ``high`` or below ``low`` (the load-imbalance alert's marks)."""
    drawn = [row for row in rows if row.has_data()]
    if not drawn:
        return empty(empty_text)
    m = _matrix(drawn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN steps stay NaN
        top, mean, bottom = np.nanmax(m, axis=0), np.nanmean(m, axis=0), np.nanmin(m, axis=0)
    seen = np.isfinite(m).any(axis=0)
    above = np.where(seen, (m > high).sum(axis=0), np.nan)
    below = np.where(seen, (m < low).sum(axis=0), np.nan)
    x = stamps(drawn[0].ts_ms[: m.shape[1]])
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "min", "x": x, "y": compact(bottom * 100, 3), "line": {"width": 1, "color": MUTED}},
        {"type": "scatter", "mode": "lines", "name": "max", "x": x, "y": compact(top * 100, 3), "fill": "tonexty",
         "fillcolor": "rgba(127,127,127,0.15)", "line": {"width": 1, "color": MUTED}},
        {"type": "scatter", "mode": "lines", "name": "mean", "x": x, "y": compact(mean * 100, 3), "line": {"width": 2, "color": colour(0)}},
        {"type": "scatter", "mode": "lines", "name": f"GPUs > {high:.0%}", "x": x, "y": compact(above), "yaxis": "y2",
         "line": {"width": 1.5, "color": BAD, "shape": "hv"}},
        {"type": "scatter", "mode": "lines", "name": f"GPUs < {low:.0%}", "x": x, "y": compact(below), "yaxis": "y2",
         "line": {"width": 1.5, "color": WARN, "shape": "hv"}},
    ]
    layout = base_layout(y_title="utilization %")
    layout["yaxis"]["range"] = [0, 100]
    layout["yaxis2"] = {"title": {"text": "GPUs"}, "overlaying": "y", "side": "right", "rangemode": "tozero", "showgrid": False,
                        "tickformat": ",d", "dtick": max(1, len(drawn) // 8)}
    layout["margin"]["r"] = 48
    return {"data": data, "layout": layout}


def outlier_bars_figure(bars: Sequence[Bar], group_means: dict[str, float], *, y_title: str, empty_text: str, ratio: float) -> Figure:
    """A bar per GPU (mean over the window), its model's mean as a step line, and GPUs more than
    ``ratio`` below that mean in red with a note."""
    if not bars:
        return empty(empty_text)
    groups = sorted({b.group for b in bars})
    index = {g: i for i, g in enumerate(groups)}
    data: list[dict[str, Any]] = []
    for group in groups:
        members = [b for b in bars if b.group == group]
        data.append({
            "type": "bar", "name": group or "unattributed", "x": [b.label for b in members], "y": compact([b.value for b in members]),
            "marker": {"color": [BAD if b.flagged else colour(index[group]) for b in members]},
            "text": [b.note for b in members], "textposition": "outside", "cliponaxis": False,
        })
        mean = group_means.get(group)
        if mean is not None:
            data.append({
                "type": "scatter", "mode": "lines", "name": f"{group or 'fleet'} mean", "x": [b.label for b in members],
                "y": compact([mean] * len(members)), "line": {"color": MUTED, "dash": "dash", "width": 1.5, "shape": "hvh"},
            })
            data.append({
                "type": "scatter", "mode": "lines", "name": f"{1 - ratio:.0%} of mean", "x": [b.label for b in members],
                "y": compact([mean * (1 - ratio)] * len(members)), "showlegend": False,
                "line": {"color": BAD, "dash": "dot", "width": 1}, "hoverinfo": "skip",
            })
    layout = base_layout(y_title=y_title, time_axis=False)
    layout["xaxis"].update(type="category", tickangle=-60, tickfont={"size": 9})
    layout["margin"]["b"] = max(60, int(category_margin(b.label for b in bars) * 0.87))  # sin 60°
    layout["legend"]["y"] = -0.45
    layout["bargap"] = 0.15
    return {"data": data, "layout": layout}


def cap_events(events: Sequence[Event], max_per_kind: int) -> list[Event]:
    """At most ``max_per_kind`` markers of each kind: when there are more, each GPU's events of
    that kind are merged in runs of consecutive ones (shown at the run's first time)."""
    out: list[Event] = []
    for kind in sorted({e.kind for e in events}):
        chosen = sorted((e for e in events if e.kind == kind), key=lambda e: (e.target, e.ts_ms))
        targets = len({e.target for e in chosen})
        if len(chosen) <= max_per_kind or max_per_kind <= targets:
            out.extend(chosen if len(chosen) <= max_per_kind else _last_per_target(chosen))
            continue
        run = -(-len(chosen) // (max_per_kind - targets))
        by_target: dict[str, list[Event]] = {}
        for e in chosen:
            by_target.setdefault(e.target, []).append(e)
        for target, mine in by_target.items():
            for i in range(0, len(mine), run):
                part = mine[i : i + run]
                detail = part[0].detail if len(part) == 1 else f"{len(part)} events in a row, the last: {part[-1].detail}"
                out.append(Event(part[0].ts_ms, target, kind, detail))
    return sorted(out, key=lambda e: e.ts_ms)


def _last_per_target(events: Sequence[Event]) -> list[Event]:
    last: dict[str, Event] = {}
    for e in events:
        last[e.target] = e
    return list(last.values())


SYMBOLS = {"XID": "x", "ECC uncorrected": "diamond", "ECC corrected": "circle-open", "row remap failure": "square"}


def events_figure(events: Sequence[Event], *, empty_text: str, max_per_kind: int = 2000) -> Figure:
    """XID / ECC / remap events on a timeline, one row per GPU (at most ``max_per_kind``
    markers a kind: see :func:`cap_events`)."""
    if not events:
        return empty(empty_text, height=220)
    events = cap_events(events, max_per_kind)
    kinds = sorted({e.kind for e in events})
    data = []
    for i, kind in enumerate(kinds):
        chosen = [e for e in events if e.kind == kind]
        data.append({
            "type": "scatter", "mode": "markers", "name": kind, "x": [e.ts_ms for e in chosen], "y": [e.target for e in chosen],
            "text": [e.detail for e in chosen], "hovertemplate": "%{y}: %{text}<extra>" + kind + "</extra>",
            "marker": {"size": 10, "symbol": SYMBOLS.get(kind, "circle"), "color": BAD if "uncorrected" in kind or kind == "XID" else colour(i)},
        })
    targets = len({e.target for e in events})
    layout = base_layout(height=max(220, min(600, 22 * targets + 110)))
    layout["hovermode"] = "closest"
    layout["yaxis"] = {"type": "category", "tickfont": {"size": 9}}
    layout["margin"]["l"] = category_margin(e.target for e in events)
    return {"data": data, "layout": layout}


__all__ = ["heatmap_figure", "imbalance_figure", "outlier_bars_figure", "events_figure", "cap_events"]
