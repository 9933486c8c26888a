"""MoE reads shared by the MoE and cost pages: tokens routed per (model, layer, expert) in the
view's range, the balance figures of each layer, and the idle expert capacity per model.

Idle expert capacity is an estimate: in an expert-parallel step every rank waits for the one
holding the busiest expert, so a layer whose busiest expert takes ``m`` times the mean keeps
``1 - 1/m`` of its experts' time idle (vLLM's and SGLang's "balancedness" is that ``1/m`` per
rank). Averaged over a model's layers and applied to the model's spend in range, it is what the
imbalance cost; it assumes experts spread evenly over the ranks and the MoE layers dominate the
step time, which the page says.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from dashboard.cost_reads import spend_breakdown
from dashboard.model import Line
from dashboard.panel import PanelContext
from dashboard.queries import View
from moe.balance import LayerBalance, layer_balance

METRIC = "moe_expert_tokens_total"
MOE_HINT = ("no MoE routing counts (moe_expert_tokens_total) in this range: run the reference worker with worker.moe "
            "experts, or read SGLang's expert recorder (scrape.targets[].expert_distribution)")


@dataclass(frozen=True)
class LayerLoad:
    model: str
    layer: str
    experts: list[str]  # sorted by number
    steps: list[Line]  # per expert, tokens routed per step
    balance: LayerBalance  # over the whole range

    @property
    def name(self) -> str:
        return f"{self.model or '?'} · layer {self.layer}"


def _number(text: str) -> tuple[int, str]:
    return (int(text), text) if text.isdigit() else (1 << 30, text)


def layer_loads(ctx: PanelContext, view: View) -> list[LayerLoad]:
    matchers = ctx.queries.inference_matchers(METRIC, view.filters)
    lines = ctx.queries.range(METRIC, matchers, view, fn="increase", by=("model", "layer", "expert"))
    grouped: dict[tuple[str, str], dict[str, Line]] = {}
    for line in lines:
        labels = line.labels
        grouped.setdefault((labels.get("model", ""), labels.get("layer", "")), {})[labels.get("expert", "")] = line
    out = []
    for (model, layer), per_expert in grouped.items():
        experts = sorted(per_expert, key=_number)
        totals = [float(np.nansum(per_expert[e].values)) for e in experts]
        if sum(totals) <= 0:
            continue
        out.append(LayerLoad(model, layer, experts, [per_expert[e] for e in experts], layer_balance(totals)))
    return sorted(out, key=lambda ld: (ld.model, _number(ld.layer)))


def imbalance_steps(load: LayerLoad) -> Line:
    """The layer's busiest expert over its mean, per step (NaN where the layer routed nothing)."""
    matrix = np.vstack([line.values for line in load.steps])
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # steps where no expert has a value: NaN, said below
        ratio = np.nanmax(matrix, axis=0) / np.nanmean(matrix, axis=0)
    return Line(load.name, load.steps[0].ts_ms, np.where(np.isfinite(ratio), ratio, np.nan))


def idle_capacity(loads: list[LayerLoad]) -> dict[str, float]:
    """Per model, the mean over its layers of 1 - mean/max (the straggler estimate above)."""
    per_model: dict[str, list[float]] = {}
    for load in loads:
        m = load.balance.max_over_mean
        if m > 0 and math.isfinite(m):
            per_model.setdefault(load.model, []).append(1 - 1 / m)
    return {model: sum(v) / len(v) for model, v in per_model.items()}


def idle_dollars(ctx: PanelContext, view: View, idle: dict[str, float]) -> dict[str, tuple[float, float]] | None:
    """Per model: (its spend in range, the idle expert capacity's share of it); None without a ledger."""
    spend = spend_breakdown(ctx.sources, view.start_ms, view.now_ms, view.filters)
    if spend is None:
        return None
    by_model: dict[str, float] = {}
    for bar in spend.get("model", []):
        by_model[bar.label] = by_model.get(bar.label, 0.0) + bar.value
    return {model: (by_model.get(model, 0.0), by_model.get(model, 0.0) * share) for model, share in idle.items()}
