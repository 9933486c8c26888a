"""The MoE rules of the default pack: the balance figures of :mod:`moe.balance` as PromQL
recording rules over ``moe_expert_tokens_total``, and the alerts on them.

Written in plain PromQL (no extension of ours), so ``rules export-prometheus`` hands the same
figures to Prometheus or vmalert. Per (model, layer), from the tokens routed per expert in the
window (``R`` = ``sum by (model, layer, expert) (rate(moe_expert_tokens_total[w]))``):

==========================================  ==========================================================
``moe:layer_max_over_mean:rate10m``          busiest expert's load / mean load
``moe:layer_cv:rate10m``                     population standard deviation / mean of the loads
``moe:layer_diversity:rate10m``              exp(entropy of the shares) / experts
``moe:layer_js_divergence_uniform:rate10m``  Jensen-Shannon divergence (bits) of the shares from uniform
``moe:layer_dead_experts:ratio<window>``     experts with no token over the window / experts
``moe:expert_utilization:ratio10m``          per expert: load / ideal load (the dashboard's heatmap)
==========================================  ==========================================================

Alerts: ``MoeExpertImbalance`` (max over mean above the threshold for 10 min, per layer),
``MoeRoutingUnexpected`` (the acceptance check's "activation frequencies as expected": the
divergence from uniform above its threshold for 10 min) and ``MoeExpertsUnused`` (info: experts
that received nothing over the window, for a week: pruning candidates, not a page).
"""

from __future__ import annotations

from typing import Any

from alerts.thresholds import Thresholds

BY = "model, layer"
SUFFIX = "rate10m"


def _load(window: str) -> str:
    return f"sum by ({BY}, expert) (rate(moe_expert_tokens_total[{window}]))"


def _share(load: str) -> str:
    return f"({load} / on ({BY}) group_left () sum by ({BY}) ({load}))"


def _uniform(load: str, like: str) -> str:
    """1 / experts, as a vector with one element per expert of ``like``."""
    return f"({like} * 0 + on ({BY}) group_left () (1 / count by ({BY}) ({load})))"


def js_divergence_uniform(load: str) -> str:
    """JS(p, u) = ½ Σ p log2(2p / (p + u)) + ½ Σ u log2(2u / (p + u)), p > 0 in the first sum."""
    p = _share(load)
    nz = f"({p} > 0)"
    u = _uniform(load, p)
    u_nz = _uniform(load, nz)
    first = f"sum by ({BY}) ({nz} * log2(2 * {nz} / ({nz} + {u_nz})))"
    second = f"sum by ({BY}) ({u} * log2(2 * {u} / ({p} + {u})))"
    return f"0.5 * {first} + 0.5 * {second}"


def dead_fraction(window: str) -> str:
    used = f"sum by ({BY}, expert) (increase(moe_expert_tokens_total[{window}]))"
    return f"(count by ({BY}) ({used} == 0) / count by ({BY}) ({used})) or (count by ({BY}) ({used}) * 0)"


def recording_rules(t: Thresholds) -> list[dict[str, Any]]:
    """The per-minute figures (group ``infermeter-moe``)."""
    r = _load("10m")
    p = _share(r)
    nz = f"({p} > 0)"
    return [
        {"record": "moe:expert_utilization:ratio10m", "expr": f"{r} / on ({BY}) group_left () avg by ({BY}) ({r})"},
        {"record": f"moe:layer_max_over_mean:{SUFFIX}", "expr": f"max by ({BY}) ({r}) / avg by ({BY}) ({r})"},
        {"record": f"moe:layer_cv:{SUFFIX}", "expr": f"stddev by ({BY}) ({r}) / avg by ({BY}) ({r})"},
        {"record": f"moe:layer_diversity:{SUFFIX}",
         "expr": f"exp(-sum by ({BY}) ({nz} * ln({nz}))) / count by ({BY}) ({r})"},
        {"record": f"moe:layer_js_divergence_uniform:{SUFFIX}", "expr": js_divergence_uniform(r)},
    ]


def unused_rules(t: Thresholds, alert: Any) -> list[dict[str, Any]]:
    """Unused experts (group ``infermeter-moe-unused``, evaluated hourly: the window is a day and
    the alert waits a week, so a per-minute read of a day of every expert's counter buys nothing)."""
    where = "layer {{ $labels.layer }} of {{ $labels.model }}"
    dead = dead_fraction(t.moe_unused_window)
    return [
        {"record": f"moe:layer_dead_experts:ratio{t.moe_unused_window}", "expr": dead},
        alert("MoeExpertsUnused", f"({dead}) > 0", "info",
              "{{ $value | humanizePercentage }} of the experts of " + where
              + f" received no token in {t.moe_unused_window}: pruning candidates",
              "7d", "1h", notice="weekly"),
    ]


def alert_rules(t: Thresholds, alert: Any) -> list[dict[str, Any]]:
    """``alert`` is the pack's rule builder (name, expr, severity, summary, for, keep)."""
    where = "layer {{ $labels.layer }} of {{ $labels.model }}"
    r = _load("10m")
    return [
        alert("MoeExpertImbalance",
              f"max by ({BY}) ({r}) / avg by ({BY}) ({r}) > {t.moe_max_over_mean:g}", "warning",
              "The busiest expert of " + where + " takes {{ printf \"%.2f\" $value }}x the mean load",
              "10m", t.keep_firing_for),
        alert("MoeRoutingUnexpected",
              f"{js_divergence_uniform(r)} > {t.moe_js_divergence:g}", "warning",
              "Routing of " + where + " is {{ printf \"%.3f\" $value }} bits (Jensen-Shannon) from uniform",
              "10m", t.keep_firing_for),
    ]
