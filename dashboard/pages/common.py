"""What the page modules share: the page spec, empty-state texts that say what to configure,
and small data helpers (ratios of lines, means over a window)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from dash import Dash

from dashboard.model import Line
from dashboard.panel import Panel, PanelContext
from dashboard.queries import View


@dataclass(frozen=True)
class Page:
    module: str  # the Dash Pages registry key
    path: str  # relative to /dashboard/
    name: str
    order: int
    panels: tuple[Panel, ...]
    register: Callable[[Dash, PanelContext], None]
    intro: str = ""
    extra: Callable[[], Any] | None = None  # components under the panels (the cost page's editor)


GPU_HINT = ("no GPU series in this range: enable local GPUs with gpu.nvml: auto (NVML), or add a dcgm-exporter "
            "target under scrape.targets")
INFERENCE_HINT = ("no inference-server series in this range: add the /metrics of your vLLM, SGLang, TGI or Triton "
                  "servers (or the reference worker) under scrape.targets")
LEDGER_HINT = ("no cost ledger rows in this range: the ledger prices every minute the GPU series "
               "(gpu.nvml or dcgm-exporter) with cost.gpu_prices, CPU nodes with cost.cpu_dollars_per_node_hour")
LIVE_COST_HINT = ("no cost series yet: the cost ledger writes them each minute once GPU series and generated tokens "
                  "are collected (scrape.targets, gpu.nvml)")
BUDGET_HINT = "no spend budget: add one under cost.budgets (scope, spend_per_period, period)"
FORECAST_HINT = ("no forecast yet: the forecast service has not produced one for this scope (it needs the forecast "
                 "service running and a few hours of cost history)")
NCCL_HINT = ("no NCCL series: point nccl.paths at NCCL debug logs (NCCL_DEBUG=INFO or WARN), PyTorch watchdog logs, "
             "NCCL Inspector output or nccl-tests results")
RULES_HINT = "the rules engine is not running (alerts: in the config), so there are no alerts to show"


def hint(view: View, text: str) -> str:
    """An empty-state text; with filters on, say that they may be what hides the data."""
    if view.filters.active:
        return f"nothing matches {view.filters.describe()} in this range — or: {text}"
    return text


def ratio_line(name: str, top: Sequence[Line], bottom: Sequence[Line], scale: float = 1.0) -> list[Line]:
    """sum(top) / sum(bottom) per step (both read with the same window)."""
    if not top or not bottom:
        return []
    num = np.nansum(np.vstack([line.values for line in top]), axis=0)
    den = np.nansum(np.vstack([line.values for line in bottom]), axis=0)
    seen = np.isfinite(np.vstack([line.values for line in bottom])).any(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(seen & (den > 0), num / den * scale, np.nan)
    return [Line(name, bottom[0].ts_ms, values)]


def window_mean(line: Line) -> float:
    finite = line.values[np.isfinite(line.values)]
    return float(finite.mean()) if len(finite) else float("nan")


def renamed(lines: Sequence[Line], name: Callable[[Line], str]) -> list[Line]:
    return [Line(name(line), line.ts_ms, line.values, line.group, line.labels) for line in lines]


def first(values: Sequence[Any], default: Any = None) -> Any:
    return values[0] if values else default


__all__ = ["Page", "hint", "ratio_line", "window_mean", "renamed", "GPU_HINT", "INFERENCE_HINT", "LEDGER_HINT",
           "LIVE_COST_HINT", "BUDGET_HINT", "FORECAST_HINT", "NCCL_HINT", "RULES_HINT"]
