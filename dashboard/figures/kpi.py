"""The overview's headline numbers as plotly indicators, each against its budget or target."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

from dashboard.figures.common import BAD, FONT, GOOD, MUTED, Figure, empty
from dashboard.model import Kpi


def _cell(row: int, col: int, rows: int, cols: int) -> dict[str, list[float]]:
    pad = 0.02
    x0, x1 = col / cols + pad, (col + 1) / cols - pad
    y1, y0 = 1 - row / rows - pad, 1 - (row + 1) / rows + pad * 3
    return {"x": [x0, x1], "y": [y0, y1]}


def _fmt(kpi: Kpi, value: float) -> str:
    if not kpi.digits or abs(value) >= 10 ** kpi.digits:
        return ",.0f"
    return f",.{kpi.digits}~g"


def _money(kpi: Kpi, value: float) -> str:
    return f"{kpi.prefix}{value:,.{max(kpi.digits, 3)}g}{kpi.suffix}"


def subtitle(kpi: Kpi) -> str:
    """The line under the title: the reference, or the share of it used."""
    if not kpi.reference:
        return ""
    if kpi.as_share and kpi.value is not None:
        return f"{kpi.value / kpi.reference:.1%} of the {_money(kpi, kpi.reference)} {kpi.reference_label}"
    return f"{kpi.reference_label} {_money(kpi, kpi.reference)}"


def kpi_figure(kpis: Sequence[Kpi], *, columns: int = 4, row_height: int = 120) -> Figure:
    """A grid of numbers; a missing one shows its hint (what to configure) instead."""
    if not kpis:
        return empty("no figures to show")
    rows = math.ceil(len(kpis) / columns)
    data: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for i, kpi in enumerate(kpis):
        domain = _cell(i // columns, i % columns, rows, columns)
        if kpi.value is None or not math.isfinite(kpi.value):
            cx, cy = sum(domain["x"]) / 2, sum(domain["y"]) / 2
            notes.append({"text": f"<b>{kpi.title}</b>", "x": cx, "y": domain["y"][1], "xref": "paper", "yref": "paper",
                          "showarrow": False, "yanchor": "top", "font": {"size": 13}})
            hint = "<br>".join(textwrap.wrap(kpi.hint or "no data", 34))
            notes.append({"text": hint, "x": cx, "y": cy - 0.05, "xref": "paper", "yref": "paper", "showarrow": False,
                          "font": {"size": 11, "color": MUTED}})
            continue
        delta = bool(kpi.reference) and not kpi.as_share
        sub = subtitle(kpi)
        trace: dict[str, Any] = {
            "type": "indicator",
            "mode": "number+delta" if delta else "number",
            "value": float(f"{kpi.value:.6g}"),
            "number": {"prefix": kpi.prefix, "suffix": kpi.suffix, "valueformat": _fmt(kpi, kpi.value), "font": {"size": 30}},
            "title": {"text": kpi.title + (f"<br><span style='font-size:11px;color:{MUTED}'>{sub}</span>" if sub else ""),
                      "font": {"size": 13}},
            "domain": domain,
        }
        if delta and kpi.reference:
            good, bad = (GOOD, BAD) if kpi.lower_is_better else (BAD, GOOD)
            trace["delta"] = {"reference": float(f"{kpi.reference:.6g}"), "relative": True, "valueformat": ".1%",
                              "increasing": {"color": bad}, "decreasing": {"color": good}}
        data.append(trace)
    layout: dict[str, Any] = {
        "height": rows * row_height + 20,
        "margin": {"l": 8, "r": 8, "t": 20, "b": 8},
        "font": FONT,
        "paper_bgcolor": "white",
        "annotations": notes,
        "meta": {"state": "data"},
    }
    return {"data": data, "layout": layout}


__all__ = ["kpi_figure", "subtitle"]
