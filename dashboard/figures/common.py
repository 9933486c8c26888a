"""Shared pieces of every figure: layout defaults, compact number lists, empty and error states."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dashboard.model import F64, I64

Figure = dict[str, Any]

PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
GOOD, WARN, BAD, MUTED = "#2ca02c", "#ff7f0e", "#d62728", "#7f7f7f"
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def compact(values: F64 | Sequence[float], significant: int = 4) -> list[float | None]:
    """Values rounded to ``significant`` digits of the largest one, NaN as None (JSON null).

    Rounding keeps the JSON short (a float64 prints 17 digits) and lets gzip find repeats;
    four digits are more than a screen shows.
    """
    arr = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.any():
        return [None] * len(arr)
    peak = float(np.max(np.abs(arr[finite])))
    decimals = significant - 1 - (int(math.floor(math.log10(peak))) if peak > 0 else 0)
    rounded = np.round(arr, max(-12, min(decimals, 12)))
    return [v if v == v and abs(v) != math.inf else None for v in rounded.tolist()]


def stamps(ts_ms: I64 | Sequence[int]) -> list[int]:
    """Times as epoch milliseconds: plotly reads numbers on a date axis as ms since 1970 (UTC)."""
    return [int(t) for t in np.asarray(ts_ms, dtype=np.int64).tolist()]


def base_layout(*, y_title: str = "", y_format: str = "", height: int = 300, time_axis: bool = True) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "height": height,
        "margin": {"l": 56, "r": 16, "t": 12, "b": 36},
        "font": FONT,
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "legend": {"orientation": "h", "y": -0.18, "font": {"size": 11}},
        "hovermode": "x unified" if time_axis else "closest",
        "xaxis": {"gridcolor": "#eee", "zeroline": False, "ticklabeloverflow": "allow", "nticks": 8},
        "yaxis": {"title": {"text": y_title}, "gridcolor": "#eee", "zeroline": False, "rangemode": "tozero", "automargin": False,
                  "ticklabeloverflow": "allow", "nticks": 6},
        "meta": {"state": "data"},
    }
    if time_axis:
        layout["xaxis"].update(type="date")  # times are UTC (the header says so)
    if y_format:
        layout["yaxis"]["tickformat"] = y_format
    return layout


def category_margin(labels: Iterable[str], font_px: int = 9, most: int = 240) -> int:
    """Pixels that category tick labels need beside their axis, from their length.

    Why not plotly's ``automargin``: it measures every label in the browser and then draws the
    whole figure a second time with the new margin, which is most of a figure's drawing time."""
    longest = max((len(label) for label in labels), default=0)
    return min(most, 14 + int(longest * font_px * 0.62))


def _wrap(text: str, width: int = 70) -> str:
    return "<br>".join(textwrap.wrap(text, width)) or text


def message_figure(text: str, *, state: str = "empty", height: int = 300) -> Figure:
    """No axes, just a sentence: what is missing and what to configure (or what failed)."""
    colour_ = BAD if state == "error" else MUTED
    return {
        "data": [],
        "layout": {
            "height": height,
            "margin": {"l": 16, "r": 16, "t": 16, "b": 16},
            "font": FONT,
            "paper_bgcolor": "white",
            "plot_bgcolor": "white",
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [
                {"text": _wrap(text), "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                 "font": {"size": 13, "color": colour_}, "align": "center"}
            ],
            "meta": {"state": state, "message": text},
        },
    }


def empty(text: str, height: int = 300) -> Figure:
    return message_figure(text, state="empty", height=height)


def error(text: str, height: int = 300) -> Figure:
    return message_figure(text, state="error", height=height)


def state_of(figure: Figure) -> str:
    return str(figure.get("layout", {}).get("meta", {}).get("state", "data"))


def points_per_trace(figure: Figure) -> int:
    """The largest number of points (cells for heatmaps) along x in any trace."""
    most = 0
    for trace in figure.get("data", []):
        for key in ("x", "y", "values"):
            value = trace.get(key)
            if isinstance(value, list) and (not value or not isinstance(value[0], list)):
                most = max(most, len(value))
        z = trace.get("z")
        if isinstance(z, list) and z and isinstance(z[0], list):
            most = max(most, max(len(row) for row in z))
    return most


def note(figure: Figure, text: str) -> Figure:
    """A remark at the top left (e.g. "no forecast yet: ...") over a drawn figure; a second
    remark goes above the first (the top margin grows to hold them all)."""
    layout = figure["layout"]
    wrapped = _wrap(text, 110)
    below = int(layout["meta"].get("note_lines", 0))  # lines of the notes already there
    layout.setdefault("annotations", []).append(
        {"text": wrapped, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0, "y": 1.0, "yshift": 14 * below,
         "xanchor": "left", "yanchor": "bottom", "font": {"size": 11, "color": MUTED}, "align": "left"}
    )
    lines = below + 1 + wrapped.count("<br>")
    layout["meta"]["note_lines"] = lines
    layout["margin"]["t"] = max(layout["margin"]["t"], 14 + 14 * lines)
    layout["meta"].setdefault("notes", []).append(text)
    return figure


def flatten(items: Iterable[Iterable[Any]]) -> list[Any]:
    return [x for group in items for x in group]


__all__ = [
    "Figure", "PALETTE", "GOOD", "WARN", "BAD", "MUTED", "colour", "compact", "stamps", "base_layout", "empty", "error",
    "message_figure", "state_of", "points_per_trace", "note", "flatten",
]  # fmt: skip
