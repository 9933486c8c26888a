"""MoE figures: expert utilization as a layer x expert heatmap (1.0 = the expert's fair share)."""

from __future__ import annotations

from collections.abc import Sequence

from dashboard.figures.common import Figure, base_layout, empty


def expert_heatmap_figure(layers: Sequence[str], experts: Sequence[str], z: Sequence[Sequence[float | None]], *,
                          empty_text: str) -> Figure:
    """One row per (model, layer), one column per expert; z = load / ideal load."""
    if not layers or not experts:
        return empty(empty_text)
    height = max(260, min(900, 18 * len(layers) + 110))
    layout = base_layout(height=height, time_axis=False)
    layout["hovermode"] = "closest"
    layout["xaxis"] = {"title": {"text": "expert"}, "type": "category", "tickfont": {"size": 9}}
    layout["yaxis"] = {"automargin": True, "type": "category", "tickfont": {"size": 9}, "autorange": "reversed"}
    peak = max((v for row in z for v in row if v is not None), default=2.0)
    trace = {
        "type": "heatmap", "x": list(experts), "y": list(layers), "z": [list(row) for row in z],
        "zmin": 0, "zmid": 1.0, "zmax": max(2.0, peak), "colorscale": "RdBu", "reversescale": True,
        "colorbar": {"title": {"text": "load / fair share"}, "thickness": 12},
        "hovertemplate": "%{y}, expert %{x}: %{z:.2f}x its fair share<extra></extra>", "hoverongaps": False,
    }
    return {"data": [trace], "layout": layout}
