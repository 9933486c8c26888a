"""GPUs: utilization heatmap (GPU × time), memory, power, temperature, per-GPU tokens/s against
its model's mean with outliers marked, load imbalance, XID / ECC events."""

from __future__ import annotations

import numpy as np
from dash import Dash

from dashboard.figures.common import Figure
from dashboard.figures.fleet import FLEET_LINES_MAX, FLEET_TRACES, fleet_lines_figure
from dashboard.figures.gpus import events_figure, heatmap_figure, imbalance_figure, outlier_bars_figure
from dashboard.model import Bar, Event, Line
from dashboard.pages.common import GPU_HINT, Page, hint, window_mean
from dashboard.panel import Panel, PanelContext, graph_panel
from dashboard.queries import View, gpu_name
from dashboard.window import Window
from store.series_index import Matcher

HEATMAP = Panel("gpu-heatmap", "Utilization per GPU over time", wide=True, height=420)
MEMORY = Panel("gpu-memory", "Memory used")
POWER = Panel("gpu-power", "Power draw")
TEMPERATURE = Panel("gpu-temperature", "Temperature")
THROUGHPUT = Panel("gpu-throughput", "Tokens/s per GPU against its model's mean (outliers in red)")
IMBALANCE = Panel("gpu-imbalance", "Load imbalance across GPUs")
EVENTS = Panel("gpu-events", "XID and ECC events", wide=True, height=220)
PANELS = (HEATMAP, MEMORY, POWER, TEMPERATURE, THROUGHPUT, IMBALANCE, EVENTS)
TOKENS_HINT = ("no per-GPU tokens/s yet: the cost ledger derives it each minute from the GPU series and the inference "
               "servers' generated tokens on the same node (scrape.targets and gpu.nvml or dcgm-exporter)")
EVENT_SERIES = ("gpu_last_xid", "gpu_xid_errors_total", "gpu_ecc_errors_total", "gpu_row_remap_failure")


def per_gpu(ctx: PanelContext, view: View, metric: str, fn: str = "avg", *, fleet: bool = False) -> list[Line]:
    """One line per GPU. ``fleet``: the figure draws a band and a few GPUs, not every line, so
    the read may step as finely as for that many traces."""
    q = ctx.queries
    g = q.gpu_matchers(view.filters)
    window = fleet_window(ctx, metric, g, view) if fleet else None
    return q.range(metric, g, view, fn=fn, name=gpu_name, window=window)  # type: ignore[arg-type]


def fleet_window(ctx: PanelContext, metric: str, g: tuple[Matcher, ...] | None, view: View) -> Window:
    """Steps for a figure of :func:`fleet_lines_figure`: as many traces as it will draw."""
    gpus = max(1, len(ctx.queries.keys(metric, g)) if g is not None else 0)  # one lookup: window_for would repeat it
    return view.window(traces=FLEET_TRACES if gpus > FLEET_LINES_MAX else gpus, series=gpus)


def heatmap(ctx: PanelContext, view: View) -> Figure:
    return heatmap_figure(per_gpu(ctx, view, "gpu_utilization_ratio"), empty_text=hint(view, GPU_HINT), z_title="util %")


def memory(ctx: PanelContext, view: View) -> Figure:
    q, t = ctx.queries, ctx.sources.targets
    g = q.gpu_matchers(view.filters)
    window = fleet_window(ctx, "gpu_memory_used_bytes", g, view)
    used = q.range("gpu_memory_used_bytes", g, view, name=gpu_name, window=window)
    free = {line.name: line for line in q.range("gpu_memory_free_bytes", g, view, name=gpu_name, window=window)}
    total = {line.name: line for line in q.range("gpu_memory_total_bytes", g, view, name=gpu_name, window=window)}
    lines = []
    for line in used:
        if line.name in free:
            denominator = line.values + free[line.name].values
        elif line.name in total:
            denominator = total[line.name].values
        else:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            lines.append(Line(line.name, line.ts_ms, np.where(denominator > 0, line.values / denominator, np.nan)))
    if lines:
        return fleet_lines_figure(lines, empty_text=hint(view, GPU_HINT), y_title="memory used %", scale=100.0,
                                  thresholds=[(t.gpu_memory_ratio, f"alert at {t.gpu_memory_ratio:.0%}")], lowest_too=False)
    return fleet_lines_figure(used, empty_text=hint(view, GPU_HINT), y_title="GiB used", scale=1 / 2**30, lowest_too=False)


def power(ctx: PanelContext, view: View) -> Figure:
    return fleet_lines_figure(per_gpu(ctx, view, "gpu_power_watts", fleet=True), empty_text=hint(view, GPU_HINT),
                              y_title="watts")


def temperature(ctx: PanelContext, view: View) -> Figure:
    t = ctx.sources.targets
    return fleet_lines_figure(per_gpu(ctx, view, "gpu_temperature_celsius", fleet=True), empty_text=hint(view, GPU_HINT),
                              y_title="°C", lowest_too=False,
                              thresholds=[(t.gpu_temperature_celsius, f"alert at {t.gpu_temperature_celsius:g} °C")])


def throughput(ctx: PanelContext, view: View) -> Figure:
    """Mean tokens/s of each GPU over the window; a GPU more than the GpuThroughputLow ratio
    below the mean of the GPUs serving its model is an outlier (the alert's rule)."""
    ratio = ctx.sources.targets.throughput_below_mean_ratio
    lines = ctx.queries.range("gpu_generation_tokens_per_second", ctx.queries.gpu_matchers(view.filters), view,
                              name=gpu_name, group=lambda labels: labels.get("model", ""))
    if view.filters.models:
        lines = [line for line in lines if line.group in view.filters.models]
    means = [(line, window_mean(line)) for line in lines]
    means = [(line, m) for line, m in means if m == m]
    per_model: dict[str, list[float]] = {}
    for line, m in means:
        per_model.setdefault(line.group, []).append(m)
    group_means = {g: float(np.mean(v)) for g, v in per_model.items()}
    bars = []
    for line, m in sorted(means, key=lambda item: (item[0].group, item[0].name)):
        low = m < (1 - ratio) * group_means[line.group]
        note = f"{m / group_means[line.group] - 1:+.0%}" if low and group_means[line.group] else ""
        bars.append(Bar(line.name, m, line.group, low, note))
    return outlier_bars_figure(bars, group_means, y_title="tokens / s (mean over range)", empty_text=hint(view, TOKENS_HINT),
                               ratio=ratio)


def imbalance(ctx: PanelContext, view: View) -> Figure:
    t = ctx.sources.targets
    return imbalance_figure(per_gpu(ctx, view, "gpu_utilization_ratio", fleet=True), high=t.imbalance_high, low=t.imbalance_low,
                            empty_text=hint(view, GPU_HINT))


def _changes(line: Line) -> list[tuple[int, float, float]]:
    """(time, value, increase) where a stepped series rises."""
    values = line.values
    finite = np.isfinite(values)
    out = []
    previous = np.nan
    for ts, v, ok in zip(line.ts_ms.tolist(), values.tolist(), finite.tolist()):
        if not ok:
            continue
        if previous == previous and v > previous:
            out.append((ts, v, v - previous))
        elif previous != previous and v > 0:
            out.append((ts, v, v))
        previous = v
    return out


def events(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    g = q.gpu_matchers(view.filters)
    if not any(q.exists(metric) for metric in EVENT_SERIES):
        return events_figure([], empty_text=hint(view, "no XID / ECC series: they come from NVML (gpu.nvml) or dcgm-exporter "
                                                       "(DCGM_FI_DEV_XID_ERRORS and the ECC counters)"))
    found: list[Event] = []
    for line in q.range("gpu_last_xid", g, view, fn="max", name=gpu_name):
        values = line.values
        last = np.nan
        for ts, v in zip(line.ts_ms.tolist(), values.tolist()):
            if v == v and v > 0 and v != last:
                found.append(Event(ts, line.name, "XID", f"XID {v:g}"))
            if v == v:
                last = v
    for line in q.range("gpu_xid_errors_total", g, view, fn="increase", name=gpu_name):
        for ts, v in zip(line.ts_ms.tolist(), line.values.tolist()):
            if v == v and v > 0:
                found.append(Event(ts, line.name, "XID", f"{v:g} XID errors" + (f" (xid {line.labels['xid']})" if "xid" in line.labels else "")))
    # Volatile and aggregate counters count the same errors; the volatile ones are read.
    ecc = None if g is None else (*g, Matcher("type", "!=", "aggregate"))
    for line in q.range("gpu_ecc_errors_total", ecc, view, fn="increase", by=("host", "gpu", "kind"), name=gpu_name):
        kind = line.labels.get("kind", "")
        for ts, v in zip(line.ts_ms.tolist(), line.values.tolist()):
            if v == v and v > 0:
                found.append(Event(ts, line.name, f"ECC {kind}".strip(), f"+{v:g} {kind} ECC errors"))
    for line in q.range("gpu_row_remap_failure", g, view, fn="max", name=gpu_name):
        for ts, _value, _inc in _changes(line):
            found.append(Event(ts, line.name, "row remap failure", "row remapping failed"))
    return events_figure(sorted(found, key=lambda e: e.ts_ms), max_per_kind=view.max_points,
                         empty_text="no XID or ECC events in this range" + (f" for {view.filters.describe()}" if view.filters.active else ""))


def register(app: Dash, ctx: PanelContext) -> None:
    graph_panel(app, ctx, HEATMAP, lambda v: heatmap(ctx, v))
    graph_panel(app, ctx, MEMORY, lambda v: memory(ctx, v))
    graph_panel(app, ctx, POWER, lambda v: power(ctx, v))
    graph_panel(app, ctx, TEMPERATURE, lambda v: temperature(ctx, v))
    graph_panel(app, ctx, THROUGHPUT, lambda v: throughput(ctx, v))
    graph_panel(app, ctx, IMBALANCE, lambda v: imbalance(ctx, v))
    graph_panel(app, ctx, EVENTS, lambda v: events(ctx, v))


PAGE = Page("dashboard.pages.gpus", "/gpus", "GPUs", 1, PANELS, register)
