"""A promtool unit-test file for the exported default rules: the same scenarios run under
``promtool test rules`` (Prometheus evaluating the exported PromQL) and ``infermeter rules test``
(our engine), so both are held to the same expected alerts.

Expected annotations are rendered with our template renderer from the expected labels and
value; the value formatting follows Go's (see :mod:`alerts.template`), so they match exactly.
"""

from __future__ import annotations

from typing import Any

import yaml

from alerts.defaults import default_rule_dicts
from alerts.template import render
from alerts.thresholds import Thresholds

# (alert, input series {series: values}, eval_time, [(labels, value)] expected firing, eval_time_before_for)
Scenario = tuple[str, dict[str, str], str, list[tuple[dict[str, str], float]], str]
MOE_SKEWED = {f'moe_expert_tokens_total{{model="m", layer="0", expert="{e}", instance="w:1"}}':
              f"{1000 * (e + 1)}+{400 if e == 0 else 100}x20" for e in range(4)}  # counters first seen non-zero

SCENARIOS: list[Scenario] = [
    ("GpuMemoryHigh",
     {'gpu_memory_used_bytes{host="n1", gpu="0"}': "91x20", 'gpu_memory_free_bytes{host="n1", gpu="0"}': "9x20"},
     "12m", [({"host": "n1", "gpu": "0"}, 0.91)], "9m"),
    ("GpuLoadImbalance",
     {'gpu_utilization_ratio{host="n1", gpu="0"}': "0.95x30", 'gpu_utilization_ratio{host="n1", gpu="1"}': "0.2x30"},
     "12m", [({}, 1.0)], "9m"),
    ("GpuThroughputLow",
     {**{f'gpu_generation_tokens_per_second{{host="n1", gpu="{g}", model="m"}}': "100x20" for g in range(3)},
      'gpu_generation_tokens_per_second{host="n1", gpu="3", model="m"}': "63x20"},
     "12m", [({"host": "n1", "gpu": "3", "model": "m"}, 63 / 90.75)], "9m"),
    ("RequestFailureRateHigh",
     {'inference_requests_total{model="m", outcome="success"}': "0+994x20",
      'inference_requests_total{model="m", outcome="failure"}': "0+6x20"},
     "10m", [({"model": "m"}, 0.006)], "4m"),
    ("TargetDown", {'up{job="vllm", instance="a:1"}': "0x10"}, "3m", [({"job": "vllm", "instance": "a:1"}, 0.0)], "1m"),
    ("QueueBacklog", {'inference_requests_waiting{model="m", instance="a:1"}': "1500x10"}, "2m",
     [({"model": "m"}, 1500.0)], "0m"),
    ("InterTokenLatencyHigh",
     {'inference_inter_token_latency_seconds_bucket{model="m", le="0.025"}': "0+980x20",
      'inference_inter_token_latency_seconds_bucket{model="m", le="0.05"}': "0+980x20",
      'inference_inter_token_latency_seconds_bucket{model="m", le="0.1"}': "0+1000x20",
      'inference_inter_token_latency_seconds_bucket{model="m", le="+Inf"}': "0+1000x20"},
     "10m", [({"model": "m"}, 0.075)], "4m"),
    ("TokenCostOverBudget",
     {'infermeter_cost_per_million_tokens_dollars{scope="model", model="m"}': "1.2x30",
      'infermeter_budget_cost_per_million_tokens_dollars{scope="model", model="m"}': "1x30"},
     "17m", [({"scope": "model", "model": "m"}, 1.2)], "10m"),
    # MoE: expert 0 of layer 0 takes 400 of every 700 tokens (2.29x the mean; 0.079 bits from uniform)
    ("MoeExpertImbalance", MOE_SKEWED, "13m", [({"model": "m", "layer": "0"}, 400 / 175)], "10m"),
    ("MoeRoutingUnexpected", MOE_SKEWED, "13m", [({"model": "m", "layer": "0"}, 0.07862088237983576)], "10m"),
    # Drift: node c runs another driver; node b lacks TORCH_NCCL_BLOCKING_WAIT=1
    ("NodeSoftwareDrift",
     {f'node_software_info{{job="gpu", host="{h}", component="driver", version="{v}"}}': "1x25"
      for h, v in (("a", "550.54.15"), ("b", "550.54.15"), ("c", "535.104.05"))},
     "17m", [({"job": "gpu", "host": "c", "component": "driver", "version": "535.104.05"}, 1.0)], "14m"),
    ("NodeSoftwareDrift",  # two nodes, two versions: no intended one, both are named
     {f'node_software_info{{job="nccl", host="{h}", component="nccl", version="{v}"}}': "1x25"
      for h, v in (("a", "2.21.5"), ("b", "2.23.4"))},
     "17m", [({"job": "nccl", "host": "a", "component": "nccl", "version": "2.21.5"}, 1.0),
             ({"job": "nccl", "host": "b", "component": "nccl", "version": "2.23.4"}, 1.0)], "14m"),
    ("NcclSettingDrift",
     {f'nccl_env_info{{job="nccl", host="{h}", name="TORCH_NCCL_BLOCKING_WAIT", value="{v}"}}': "1x25"
      for h, v in (("a", "1"), ("b", "0"), ("c", "1"))},
     "17m", [({"job": "nccl", "host": "b", "name": "TORCH_NCCL_BLOCKING_WAIT", "value": "0"}, 1.0)], "14m"),
]


def _rule(name: str) -> dict[str, Any]:
    for group in default_rule_dicts(Thresholds())["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return rule  # type: ignore[no-any-return]
    raise KeyError(name)


def _expected(name: str, labels: dict[str, str], value: float) -> dict[str, Any]:
    rule = _rule(name)
    full = {**labels, **rule.get("labels", {})}
    rendered = {k: render(v, {**full, "alertname": name}, value) for k, v in rule.get("annotations", {}).items()}
    return {"exp_labels": full, "exp_annotations": rendered}


def unit_tests_yaml(rules_file: str) -> str:
    tests = []
    for name, series, eval_time, firing, before in SCENARIOS:
        tests.append({
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [
                {"eval_time": before, "alertname": name, "exp_alerts": []},
                {"eval_time": eval_time, "alertname": name, "exp_alerts": [_expected(name, lab, v) for lab, v in firing]},
            ],
        })
    doc = {"rule_files": [rules_file], "evaluation_interval": "30s", "tests": tests}
    header = "# Generated by `infermeter rules export-prometheus`: run with `promtool test rules` or `infermeter rules test`.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=200)
