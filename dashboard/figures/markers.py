"""Deploy and config-change markers drawn on time charts: a dotted vertical line per marker with
its version (or kind) at the top, the whole description on hover over that label. Layout only:
the figure's traces stay the data's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dashboard.figures.common import MUTED, Figure

MAX_MARKERS = 50  # the newest; a chart with more lines than that shows no timeline


def with_markers(figure: Figure, markers: Sequence[Any]) -> Figure:
    """``markers``: objects with ``at_ms``, ``kind``, ``version`` and ``describe()``; only figures
    with data on a date axis get them (empty and message figures stay as they are)."""
    layout = figure.get("layout", {})
    if not markers or layout.get("xaxis", {}).get("type") != "date" or layout.get("meta", {}).get("state") != "data":
        return figure
    shapes = list(layout.get("shapes", []))
    notes = list(layout.get("annotations", []))
    for m in list(markers)[-MAX_MARKERS:]:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": m.at_ms, "x1": m.at_ms, "y0": 0, "y1": 1,
                       "line": {"color": MUTED, "width": 1, "dash": "dot"}, "name": f"marker-{m.id}"})
        notes.append({"x": m.at_ms, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom", "showarrow": False,
                      "text": (m.version or m.kind)[:24], "hovertext": m.describe(), "name": f"marker-{m.id}",
                      "font": {"size": 9, "color": MUTED}})
    layout["shapes"], layout["annotations"] = shapes, notes
    return figure
