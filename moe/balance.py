"""Load-balance figures of one MoE layer, from the tokens routed to each of its experts.

The definitions are the ones NVIDIA NeMo and Megatron-Core use to judge MoE load balance (see
the README's "MoE expert routing" section for the sources):

* ideal load = tokens routed in the layer / number of experts (a perfectly balanced router);
* utilization of an expert = its load / the ideal load (1.0 everywhere when balanced);
* coefficient of variation = population standard deviation of the loads / their mean;
* max over mean = the busiest expert's load / the mean load (the straggler that sets the pace of
  an expert-parallel step);
* dead fraction = experts that received no token / experts (pruning candidates);
* diversity = exp(H) / N, H the Shannon entropy (natural log) of the routing shares: the
  "effective number of experts" as a fraction of all of them (1.0 balanced, 1/N collapsed);
* Jensen-Shannon divergence (base 2, 0..1) of the observed shares from an expected
  distribution, uniform unless one is given: the acceptance check's "activation frequencies as
  expected".

The same figures are produced as recording rules (:mod:`alerts.moe_rules`) so that Prometheus or vmalert
compute them identically from ``moe_expert_tokens_total``; this module is what the dashboard, the
report and the tests use on numbers already read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LayerBalance:
    experts: int
    tokens: float
    utilization: tuple[float, ...]  # per expert, load / ideal load (0 when the layer saw no token)
    cv: float
    max_over_mean: float
    dead_fraction: float
    diversity: float
    js_divergence: float  # from the expected distribution (uniform by default)

    @property
    def dead_experts(self) -> tuple[int, ...]:
        return tuple(i for i, u in enumerate(self.utilization) if u == 0)


def shares(loads: Sequence[float]) -> list[float]:
    total = float(sum(loads))
    if total <= 0:
        return [0.0] * len(loads)
    return [max(0.0, x) / total for x in loads]


def js_divergence(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen-Shannon divergence in bits (0 identical, 1 disjoint) of two distributions."""
    if len(p) != len(q):
        raise ValueError(f"distributions of different lengths ({len(p)} and {len(q)} experts)")
    p, q = shares(p), shares(q)
    total = 0.0
    for a, b in zip(p, q):
        m = (a + b) / 2
        if a > 0:
            total += 0.5 * a * math.log2(a / m)
        if b > 0:
            total += 0.5 * b * math.log2(b / m)
    return max(0.0, min(1.0, total))


def layer_balance(loads: Sequence[float], expected: Sequence[float] | None = None) -> LayerBalance:
    """The balance figures of one layer's per-expert loads (tokens routed in some window)."""
    n = len(loads)
    if n == 0:
        raise ValueError("a layer with no experts")
    values = [max(0.0, float(x)) for x in loads]
    total = sum(values)
    mean = total / n
    if total <= 0:
        return LayerBalance(n, 0.0, (0.0,) * n, 0.0, 0.0, 1.0, 0.0, 0.0)
    std = math.sqrt(sum((x - mean) ** 2 for x in values) / n)
    p = shares(values)
    entropy = -sum(s * math.log(s) for s in p if s > 0)
    return LayerBalance(
        experts=n,
        tokens=total,
        utilization=tuple(x / mean for x in values),
        cv=std / mean,
        max_over_mean=max(values) / mean,
        dead_fraction=sum(1 for x in values if x == 0) / n,
        diversity=math.exp(entropy) / n,
        js_divergence=js_divergence(p, expected if expected is not None else [1.0] * n),
    )
