"""Non-time figures: spend broken down by a dimension (stacked by cost component) and NCCL
bus bandwidth against message size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from dashboard.figures.common import Figure, base_layout, colour, compact, empty
from dashboard.model import Bar, SizePoint

COMPONENT_ORDER = ("gpu", "energy", "overhead", "idle")
COMPONENT_COLOURS = {"gpu": "#1f77b4", "energy": "#ff7f0e", "overhead": "#9467bd", "idle": "#d62728"}


def spend_bars_figure(bars: Sequence[Bar], *, empty_text: str, top: int = 20) -> Figure:
    """Horizontal bars per label, stacked by component (``Bar.group``), largest total on top;
    labels past ``top`` are summed into "other"."""
    if not bars or not any(b.value for b in bars):
        return empty(empty_text)
    totals: dict[str, float] = defaultdict(float)
    for b in bars:
        totals[b.label] += b.value
    ranked = sorted(totals, key=lambda k: -totals[k])
    keep = set(ranked[:top])
    cells: dict[tuple[str, str], float] = defaultdict(float)
    for b in bars:
        cells[(b.label if b.label in keep else "other", b.group)] += b.value
    labels = [k for k in ranked if k in keep] + (["other"] if len(ranked) > top else [])
    components = [c for c in COMPONENT_ORDER if any(g == c for _, g in cells)]
    components += sorted({g for _, g in cells} - set(components))
    data: list[dict[str, Any]] = []
    for i, comp in enumerate(components):
        data.append({
            "type": "bar", "orientation": "h", "name": comp or "total", "y": labels,
            "x": compact([cells.get((label, comp), 0.0) for label in labels]),
            "marker": {"color": COMPONENT_COLOURS.get(comp, colour(i))},
            "hovertemplate": "%{y}: $%{x:,.2f}<extra>" + (comp or "total") + "</extra>",
        })
    layout = base_layout(y_title="", height=max(220, min(560, 26 * len(labels) + 90)), time_axis=False)
    layout["barmode"] = "stack"
    layout["hovermode"] = "closest"
    layout["xaxis"].update(title={"text": "$"}, tickformat="$,.2f")
    layout["yaxis"] = {"type": "category", "automargin": True, "autorange": "reversed"}
    return {"data": data, "layout": layout}


def size_figure(points: Sequence[SizePoint], *, y_title: str, empty_text: str, scale: float = 1.0) -> Figure:
    """One line per series (operation and source) over message size on a log axis."""
    if not points:
        return empty(empty_text)
    names = sorted({p.series for p in points})
    data: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        chosen = sorted((p for p in points if p.series == name), key=lambda p: p.size_bytes)
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": name, "x": [p.size_bytes for p in chosen],
            "y": compact([p.value * scale for p in chosen]), "line": {"color": colour(i), "width": 1.5}, "marker": {"size": 5},
        })
    layout = base_layout(y_title=y_title, time_axis=False)
    layout["hovermode"] = "closest"
    layout["xaxis"].update(type="log", title={"text": "message size (bytes)"}, exponentformat="SI")
    return {"data": data, "layout": layout}


__all__ = ["spend_bars_figure", "size_figure", "COMPONENT_ORDER"]
