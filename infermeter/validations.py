"""The acceptance check's fleet phase (read from the store for the run's window) and its history.

Fleet checks use the same series the dashboards and rules do: ``gpu_utilization_ratio`` and
``gpu_memory_used_bytes`` of the hosts serving the endpoint, the live
``infermeter_cost_per_million_tokens_dollars`` of the model (or the fleet), and
``moe_expert_tokens_total`` of the model. A run's result is stored whole; the cost check compares
with the last *passed* run of the same URL and model (its baseline, kept by :mod:`releases.runs`) and
with the per-token budget.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from alerts.thresholds import Thresholds
from cost.prices import CostSettings
from infermeter.validate import Check, Result
from moe.balance import layer_balance
from promql import SampleSource, Vector, context_at, first_value, parse


def _value(source: SampleSource, expr: str, at_ms: int) -> float:
    return first_value(context_at(source, at_ms), expr)


def _hosts(hosts: list[str]) -> str:
    return "|".join(re.escape(h) for h in hosts) or "^$"


def fleet_phase(source: SampleSource, result: Result, hosts: list[str], thresholds: Thresholds, cost: CostSettings,
                baseline: dict[str, Any] | None, moe_expected: list[float] | None = None) -> None:
    start, end = result.started_ms, result.ended_ms
    window = f"{max(1, (end - start) // 1000)}s"
    h = f'host=~"{_hosts(hosts)}"'
    util = _value(source, f"avg(avg_over_time(gpu_utilization_ratio{{{h}}}[{window}]))", end)
    goal = thresholds.utilization_target
    if math.isnan(util):
        result.checks.append(Check("fleet: GPU utilization under load", "not measurable", "-", f"≥ {goal:.0%}",
                                   f"no gpu_utilization_ratio for host {', '.join(hosts)} in the run's window"))
    else:
        result.checks.append(Check("fleet: GPU utilization under load", "pass" if util >= goal else "fail",
                                   f"{util:.1%}", f"≥ {goal:.0%}"))
    memory = _value(source, f"max(max_over_time(gpu_memory_used_bytes{{{h}}}[{window}]))", end)
    result.checks.append(Check("fleet: peak GPU memory", "not measurable" if math.isnan(memory) else "pass",
                               "-" if math.isnan(memory) else f"{memory / 2**30:.1f} GiB", "recorded as the baseline",
                               "no gpu_memory_used_bytes in the window" if math.isnan(memory) else ""))
    _cost(source, result, window, thresholds, cost, baseline)
    _moe(source, result, window, thresholds, moe_expected)


def _cost(source: SampleSource, result: Result, window: str, t: Thresholds, cost: CostSettings,
          baseline: dict[str, Any] | None) -> None:
    model = result.model
    selector = (f'infermeter_cost_per_million_tokens_dollars{{scope="model",model={json.dumps(model)}}}' if model
                else 'infermeter_cost_per_million_tokens_dollars{scope="fleet"}')
    measured = _value(source, f"avg(avg_over_time({selector}[{window}]))", result.ended_ms)
    name = "cost: per 1M tokens during the run"
    if math.isnan(measured):
        result.checks.append(Check(name, "not measurable", "-", "within budget and baseline",
                                   "no live cost series for the window (the ledger writes them each minute)"))
        return
    budget = next((b.cost_per_million_tokens for b in cost.budgets
                   if b.cost_per_million_tokens and (b.model == model if model else b.scope == "fleet")), None)
    limits = []
    if budget:
        limits.append(("budget", budget * (1 + t.cost_over_budget_ratio)))
    before = _baseline_cost(baseline)
    if before is not None:
        limits.append(("previous accepted run", before * (1 + t.cost_over_budget_ratio)))
    over = [f"{what} ${limit:.4f}" for what, limit in limits if measured > limit]
    goal = (" and ".join(f"≤ {what} + {t.cost_over_budget_ratio:.0%}" for what, _ in limits)
            or "no budget or baseline yet: recorded as the baseline")
    result.checks.append(Check(name, "fail" if over else "pass", f"${measured:.4f}", goal,
                               ("over " + ", ".join(over)) if over else ""))


def _baseline_cost(baseline: dict[str, Any] | None) -> float | None:
    for check in (baseline or {}).get("checks", []):
        if check.get("name") == "cost: per 1M tokens during the run" and str(check.get("measured", "")).startswith("$"):
            return float(check["measured"][1:])
    return None


def _moe(source: SampleSource, result: Result, window: str, t: Thresholds, expected: list[float] | None) -> None:
    m = f"model={json.dumps(result.model)}" if result.model else ""
    value = context_at(source, result.ended_ms).evaluate(
        parse(f"sum by (layer, expert) (increase(moe_expert_tokens_total{{{m}}}[{window}]))"))
    name = "MoE: expert activation distribution"
    if not isinstance(value, Vector) or not len(value):
        result.checks.append(Check(name, "not measurable", "-", f"JS ≤ {t.moe_js_divergence:g} bits",
                                   "the engine exports no expert routing counts"))
        return
    layers: dict[str, dict[int, float]] = {}
    for labels, v in value.as_dicts():
        expert = labels.get("expert", "")
        layers.setdefault(labels.get("layer", ""), {})[int(expert) if expert.isdigit() else len(layers)] = float(v)
    target = "the expected distribution" if expected else "uniform"
    scores = []
    for layer, per_expert in layers.items():
        loads = [per_expert[e] for e in sorted(per_expert)]
        if expected is not None and len(expected) != len(loads):
            result.checks.append(Check(name, "not measurable", "-", f"JS ≤ {t.moe_js_divergence:g} bits",
                                       f"the expected distribution has {len(expected)} experts, layer {layer} {len(loads)}"))
            return
        scores.append((layer, layer_balance(loads, expected).js_divergence))
    worst_layer, worst = max(scores, key=lambda x: x[1])
    result.checks.append(Check(name, "pass" if worst <= t.moe_js_divergence else "fail",
                               f"JS {worst:.3f} bits (layer {worst_layer}, worst of {len(layers)})",
                               f"≤ {t.moe_js_divergence:g} bits from {target}"))
