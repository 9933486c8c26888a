"""Forecast charts: one panel per series, mean line with 80 % and 95 % bands.

``.html`` is written with plotly (self-contained, plotly.js inlined). ``.png`` needs
matplotlib; without it :class:`PlotError` says so (the HTML chart needs nothing extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from forecast.record import StoredForecast


class PlotError(Exception):
    pass


def _times(f: StoredForecast) -> list[datetime]:
    return [datetime.fromtimestamp(t / 1000, tz=UTC) for t in f.times_ms()]


def write_plot(forecasts: Sequence[StoredForecast], path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        _html(forecasts, path)
    elif suffix == ".png":
        _png(forecasts, path)
    else:
        raise PlotError(f"{path}: unknown chart type {suffix or '(none)'}; use .html or .png")


def _html(forecasts: Sequence[StoredForecast], path: Path) -> None:
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError as exc:
        raise PlotError("plotly is not installed (pip install plotly)") from exc
    rows = max(1, len(forecasts))
    titles = [f"{f.series} ({f.series.unit}) - {f.model}" for f in forecasts]
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=False, subplot_titles=titles, vertical_spacing=0.08)
    for row, f in enumerate(forecasts, start=1):
        x = _times(f)
        for lo, hi, name, alpha in ((f.lo95, f.hi95, "95 %", 0.15), (f.lo80, f.hi80, "80 %", 0.3)):
            fig.add_trace(
                go.Scatter(x=x, y=hi.tolist(), line={"width": 0}, showlegend=False, hoverinfo="skip"), row, 1
            )
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=lo.tolist(),
                    fill="tonexty",
                    fillcolor=f"rgba(31,119,180,{alpha})",
                    line={"width": 0},
                    name=name,
                    showlegend=row == 1,
                ),
                row,
                1,
            )
        fig.add_trace(
            go.Scatter(
                x=x, y=f.mean.tolist(), line={"color": "rgb(31,119,180)"}, name="mean", showlegend=row == 1
            ),
            row,
            1,
        )
    fig.update_layout(height=320 * rows, title="infermeter forecast", template="plotly_white")
    path.write_text(fig.to_html(include_plotlyjs=True, full_html=True), encoding="utf-8")


def _png(forecasts: Sequence[StoredForecast], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotError("a PNG chart needs matplotlib (pip install matplotlib); or write .html") from exc
    rows = max(1, len(forecasts))
    fig, axes = plt.subplots(rows, 1, figsize=(10, 3 * rows), squeeze=False)
    for ax, f in zip(axes[:, 0], forecasts):
        x = _times(f)
        ax.fill_between(x, f.lo95, f.hi95, alpha=0.15, label="95 %")
        ax.fill_between(x, f.lo80, f.hi80, alpha=0.3, label="80 %")
        ax.plot(x, f.mean, label="mean")
        ax.set_title(f"{f.series} ({f.series.unit}) - {f.model}")
        ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
