"""Charts of the PDF report, as reportlab drawings (vector, no image library): cumulative spend
against the budget with the projection of the rest of the period, spend by component, and
horizontal bars for the largest lines of a breakdown. Each returns ``None`` when there is
nothing to draw, and the PDF says so in words instead of drawing empty axes."""

from __future__ import annotations

from collections.abc import Sequence

from reportlab.graphics.charts.barcharts import HorizontalBarChart
from reportlab.graphics.charts.legends import Legend
from reportlab.graphics.charts.lineplots import LinePlot
from reportlab.graphics.charts.piecharts import Pie
from reportlab.graphics.shapes import Drawing, String
from reportlab.lib import colors

from reports.model import EvaluationLine, FinanceReport, SpendLine

PALETTE = [colors.HexColor(c) for c in ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                        "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")]
DAY_MS = 86_400_000


def _title(drawing: Drawing, text: str, width: float, height: float) -> None:
    drawing.add(String(width / 2, height - 12, text, textAnchor="middle", fontName="Helvetica-Bold", fontSize=10))


def cumulative_spend(report: FinanceReport, width: float = 480, height: float = 220) -> Drawing | None:
    """Cumulative spend per day; the fleet spend budget as a flat line; the forecast (mean and
    band end points) and the run-rate projection from now to the period end, dashed."""
    if not report.days:
        return None
    days = (report.period.end_ms - report.period.start_ms) / DAY_MS

    def x(ms: int) -> float:
        return (ms - report.period.start_ms) / DAY_MS

    series: list[list[tuple[float, float]]] = [[(0.0, 0.0)] + [(x(d.day_ms) + 1, d.cumulative) for d in report.days]]
    names = ["spend to date"]
    styles: list[tuple[colors.Color, list[float] | None]] = [(PALETTE[0], None)]
    f = report.forecast
    end_x = days
    now_x = x(f.remaining_from_ms)
    if f.state == "open" and f.forecast is not None:
        w = f.forecast
        until_x = x(w.until_ms)
        series.append([(now_x, f.spent), (until_x, f.spent + w.mean)])
        names.append(f"forecast ({w.source})")
        styles.append((PALETTE[1], [4, 2]))
        if w.high is not None and w.low is not None:
            series.append([(now_x, f.spent), (until_x, f.spent + w.high)])
            names.append(f"forecast upper {w.level} %")
            styles.append((PALETTE[1], [1, 2]))
    if f.state == "open" and f.run_rate_rest is not None:
        series.append([(now_x, f.spent), (end_x, f.spent + f.run_rate_rest)])
        names.append("run rate, last 7 days")
        styles.append((PALETTE[7], [2, 2]))
    fleet = [b for b in report.budgets if b.scope == "fleet" and b.spend_budget is not None]
    if fleet and fleet[0].spend_budget is not None:
        series.append([(0.0, fleet[0].spend_budget), (end_x, fleet[0].spend_budget)])
        names.append("spend budget")
        styles.append((PALETTE[3], None))
    top = max(max(y for _, y in s) for s in series)
    drawing = Drawing(width, height)
    _title(drawing, f"Cumulative spend ({report.currency})", width, height)
    plot = LinePlot()
    plot.x, plot.y, plot.width, plot.height = 50, 45, width - 70, height - 75
    plot.data = series
    plot.xValueAxis.valueMin, plot.xValueAxis.valueMax = 0, end_x
    plot.xValueAxis.valueStep = 5 if end_x > 10 else 1
    plot.xValueAxis.labelTextFormat = "%d"
    plot.yValueAxis.valueMin = 0
    plot.yValueAxis.valueMax = top * 1.1 if top > 0 else 1
    plot.yValueAxis.labelTextFormat = "%.0f" if top >= 10 else "%.2f"
    for i, (color, dash) in enumerate(styles):
        plot.lines[i].strokeColor = color
        plot.lines[i].strokeWidth = 1.5
        if dash:
            plot.lines[i].strokeDashArray = dash
    drawing.add(plot)
    drawing.add(String(plot.x + plot.width / 2, 22, "day of the period", textAnchor="middle", fontSize=7))
    legend = Legend()
    legend.x, legend.y = 55, height - 22
    legend.fontSize, legend.columnMaximum, legend.alignment = 7, 1, "right"
    legend.dx, legend.dy, legend.deltax = 8, 4, 95
    legend.colorNamePairs = [(c, n) for (c, _), n in zip(styles, names)]
    drawing.add(legend)
    return drawing


def components_pie(report: FinanceReport, width: float = 240, height: float = 170) -> Drawing | None:
    lines = [s for s in report.spend["component"] if s.dollars > 0]
    if not lines:
        return None
    drawing = Drawing(width, height)
    _title(drawing, "Spend by component", width, height)
    pie = Pie()
    pie.x, pie.y, pie.width, pie.height = 20, 15, 110, 110
    pie.data = [s.dollars for s in lines]
    pie.labels = None
    for i in range(len(lines)):
        pie.slices[i].fillColor = PALETTE[i % len(PALETTE)]
        pie.slices[i].strokeColor = colors.white
    drawing.add(pie)
    legend = Legend()
    legend.x, legend.y = 145, 110
    legend.fontSize, legend.alignment = 7, "right"
    legend.colorNamePairs = [(PALETTE[i % len(PALETTE)], f"{s.label} {s.share:.0%}") for i, s in enumerate(lines)]
    drawing.add(legend)
    return drawing


def _bars(title: str, labels: Sequence[str], values: Sequence[float], *, label_width: float, colour: colors.Color,
          value_format: str, width: float, height: float) -> Drawing:
    """Horizontal bars, the first item on top."""
    drawing = Drawing(width, height)
    _title(drawing, title, width, height)
    chart = HorizontalBarChart()
    chart.x, chart.y, chart.width, chart.height = label_width, 15, width - label_width - 15, height - 40
    chart.data = [list(reversed(values))]
    chart.categoryAxis.categoryNames = list(reversed(labels))
    chart.categoryAxis.labels.fontSize = 7
    chart.valueAxis.valueMin = 0
    chart.valueAxis.labels.fontSize = 7
    chart.valueAxis.labelTextFormat = value_format
    chart.bars[0].fillColor = colour
    drawing.add(chart)
    return drawing


def top_bars(lines: Sequence[SpendLine], title: str, currency: str, top: int = 8,
             width: float = 240, height: float = 170) -> Drawing | None:
    shown = [s for s in lines if s.dollars > 0][:top]
    if not shown:
        return None
    return _bars(f"{title} ({currency})", [s.label[:18] for s in shown], [s.dollars for s in shown], label_width=95,
                 colour=PALETTE[0], value_format="%.0f" if max(s.dollars for s in shown) >= 10 else "%.2f",
                 width=width, height=height)  # largest on top


def evaluation_bars(lines: Sequence[EvaluationLine], currency: str, width: float = 480,
                    height: float = 170) -> Drawing | None:
    """$ per 1M tokens of the newest evaluation's candidates, cheapest on top."""
    if not lines:
        return None
    newest = max(v.run for v in lines)
    shown = [v for v in lines if v.run == newest and v.dollars_per_million is not None][:10]
    if not shown:
        return None
    return _bars(f"{currency} per 1M output tokens, measured (evaluation {newest})",
                 [f"{v.candidate[:14]} ({v.gpus}x {v.gpu[:10]})" for v in shown],
                 [float(v.dollars_per_million or 0.0) for v in shown], label_width=150, colour=PALETTE[2],
                 value_format="%.2f", width=width, height=height)
