"""Evaluate the comparison's quantities over the windows before and after a moment."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from promql import SampleSource, parse
from promql.range_query import evaluate_range
from releases.compare import F64, QUANTITIES, Change, Quantity, compare_values
from releases.markers import Marker


@dataclass(frozen=True)
class Windows:
    at_ms: int
    window_ms: int = 3_600_000
    settle_ms: int = 300_000  # after the change, skip this long (restarts, warm-up) before measuring
    step_ms: int = 60_000

    @property
    def before(self) -> tuple[int, int]:
        return self.at_ms - self.window_ms, self.at_ms - self.step_ms

    @property
    def after(self) -> tuple[int, int]:
        start = self.at_ms + self.settle_ms
        return start, start + self.window_ms - self.step_ms


@dataclass
class Comparison:
    windows: Windows
    model: str
    node: str
    marker: Marker | None
    changes: list[Change] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        w = self.windows
        return {"at_ms": w.at_ms, "model": self.model, "node": self.node,
                "marker": self.marker.to_json() if self.marker else None,
                "before": {"start_ms": w.before[0], "end_ms": w.before[1]},
                "after": {"start_ms": w.after[0], "end_ms": w.after[1]},
                "changes": [c.to_json() for c in self.changes]}


def _label(value: str) -> str:
    return json.dumps(value)  # a PromQL string literal (double quotes, escapes)


def _values(source: SampleSource, expr: str, start_ms: int, end_ms: int, step_ms: int) -> F64:
    series = evaluate_range(parse(expr), source, start_ms, end_ms, step_ms)
    if not series:
        return np.empty(0, np.float64)
    return np.asarray(series[0].values, np.float64)


def compare_windows(source: SampleSource, windows: Windows, rng: np.random.Generator, *, model: str = "",
                    node: str = "", marker: Marker | None = None,
                    quantities: tuple[Quantity, ...] = QUANTITIES) -> Comparison:
    m = f"model={_label(model)}" if model else ""
    h = f"host={_label(node)}" if node else ""
    out = Comparison(windows, model, node, marker)
    for q in quantities:
        expr = q.expr(m, h)
        before = _values(source, expr, *windows.before, windows.step_ms)
        after = _values(source, expr, *windows.after, windows.step_ms)
        out.changes.append(compare_values(q, before, after, rng))
    return out


def format_value(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "-"
    if unit == "ratio":
        return f"{value:.2%}"
    if unit == "$":
        return f"${value:,.4f}"
    return f"{value:,.4g} {unit}"


def table_lines(c: Comparison) -> list[str]:
    """The comparison as aligned text (the CLI's output)."""
    head = f"{'quantity':<22} {'before':>14} {'after':>14} {'change':>9} {'95% interval':>19} {'p':>7}  verdict"
    lines = [head]
    for ch in c.changes:
        change = f"{ch.change:+.1%}" if math.isfinite(ch.change) else "-"
        interval = f"[{ch.low:+.1%}, {ch.high:+.1%}]" if math.isfinite(ch.low) else "-"
        p = f"{ch.p_value:.3f}" if math.isfinite(ch.p_value) else "-"
        lines.append(f"{ch.title:<22} {format_value(ch.before, ch.unit):>14} {format_value(ch.after, ch.unit):>14} {change:>9} "
                     f"{interval:>19} {p:>7}  {ch.verdict}")
    return lines
