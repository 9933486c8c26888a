"""Per-GPU series of a fleet as a band and its extremes, not one trace per GPU.

Why: a browser's drawing time grows with the number of traces (each is an SVG path with its
own hover layer), and 512 GPU lines on one chart take seconds to draw while saying less than
the fleet's spread and the few GPUs at its edges. Up to :data:`FLEET_LINES_MAX` GPUs (a node,
or a filtered view) every GPU keeps its own line; above it the figure shows the fleet's
min–max band and median per step, and the ``extremes`` GPUs with the highest (and, where
asked, the lowest) mean over the range by name. Where many points remain in one figure the
lines are WebGL traces (``scattergl``), which draw in one pass whatever the point count.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from dashboard.figures.common import MUTED, Figure, base_layout, colour, compact, empty, stamps
from dashboard.figures.series import add_thresholds, lines_figure
from dashboard.model import F64, I64, Line

FLEET_LINES_MAX = 16  # up to this many GPUs: one line each
EXTREMES = 3  # GPUs named at each edge of the band
FLEET_TRACES = 3 + 2 * EXTREMES  # what a banded figure draws at most: reads may step finer than per GPU
WEBGL_POINTS = 20_000  # more points than this in one figure: its lines are drawn with WebGL
BAND_FILL = "rgba(31,119,180,0.15)"


def aligned(lines: Sequence[Line]) -> tuple[I64, F64]:
    """The lines on their common time axis: a (line × step) matrix, NaN where a line has no step."""
    ts = np.unique(np.concatenate([line.ts_ms for line in lines]))
    matrix = np.full((len(lines), len(ts)), np.nan)
    for i, line in enumerate(lines):
        matrix[i, np.searchsorted(ts, line.ts_ms)] = line.values
    return ts, matrix


def fleet_lines_figure(
    lines: Sequence[Line],
    *,
    empty_text: str,
    y_title: str = "",
    scale: float = 1.0,
    thresholds: Sequence[tuple[float, str]] = (),
    lowest_too: bool = True,
    extremes: int = EXTREMES,
    height: int = 300,
) -> Figure:
    """One line per GPU up to :data:`FLEET_LINES_MAX` GPUs, else the band and the extremes.

    ``lowest_too``: name the lowest GPUs as well as the highest (power: an idle GPU matters;
    temperature: only the hot end does)."""
    drawn = [line for line in lines if line.has_data()]
    if not drawn:
        return empty(empty_text, height)
    if len(drawn) <= FLEET_LINES_MAX:
        return lines_figure(drawn, empty_text=empty_text, y_title=y_title, scale=scale, thresholds=thresholds, height=height)
    ts, matrix = aligned(drawn)
    matrix = matrix * scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a step no GPU reported stays NaN
        low, median, high = np.nanmin(matrix, axis=0), np.nanmedian(matrix, axis=0), np.nanmax(matrix, axis=0)
        means = np.nanmean(matrix, axis=1)
    order = np.argsort(-means, kind="stable")  # NaN means (no finite value) cannot occur: rows have data
    top = order[:extremes].tolist()
    bottom = [i for i in order[::-1][:extremes].tolist() if i not in top] if lowest_too else []
    x = stamps(ts)
    points = len(ts) * (3 + len(top) + len(bottom))
    line_type = "scattergl" if points > WEBGL_POINTS else "scatter"
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "fleet min", "x": x, "y": compact(low), "showlegend": False,
         "line": {"width": 0, "color": BAND_FILL}, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "name": f"fleet min–max ({len(drawn)} GPUs)", "x": x, "y": compact(high),
         "fill": "tonexty", "fillcolor": BAND_FILL, "line": {"width": 0, "color": BAND_FILL}, "hoverinfo": "skip"},
        {"type": line_type, "mode": "lines", "name": "fleet median", "x": x, "y": compact(median),
         "line": {"width": 2, "color": MUTED}},
    ]
    for rank, i in enumerate(top):
        data.append(_named(drawn[i], x, matrix[i], line_type, colour(rank), "highest", dashed=False))
    for rank, i in enumerate(bottom):
        data.append(_named(drawn[i], x, matrix[i], line_type, colour(len(top) + rank), "lowest", dashed=True))
    layout = base_layout(y_title=y_title, height=height)
    layout["meta"]["fleet"] = {"gpus": len(drawn), "highest": [drawn[i].name for i in top],
                               "lowest": [drawn[i].name for i in bottom]}
    edges = f"the {len(top)} highest" + (f" and {len(bottom)} lowest" if bottom else "")
    layout["annotations"] = [{"text": f"{len(drawn)} GPUs: band min–max, median; {edges} by mean are named "
                                      "(filter a node to see each GPU)", "xref": "paper", "yref": "paper", "x": 0,
                              "y": 1.0, "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                              "font": {"size": 10, "color": MUTED}}]
    layout["margin"]["t"] = 22
    return add_thresholds({"data": data, "layout": layout}, thresholds, scale)


def _named(line: Line, x: list[int], values: F64, line_type: str, color: str, edge: str, *, dashed: bool) -> dict[str, Any]:
    return {"type": line_type, "mode": "lines", "name": f"{line.name} ({edge})", "x": x, "y": compact(values),
            "line": {"width": 1.5, "color": color, **({"dash": "dash"} if dashed else {})}}


__all__ = ["fleet_lines_figure", "aligned", "FLEET_LINES_MAX", "FLEET_TRACES", "EXTREMES", "WEBGL_POINTS"]
