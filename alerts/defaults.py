"""The default rule pack: every threshold of MISSION.md as a rule over canonical metric names,
each value configurable through :class:`Thresholds` (``alerts.thresholds`` in the config).

The pack is produced as ordinary rule-file YAML, so ``infermeter rules export-prometheus``
and ``rules check`` treat it exactly like a user's file.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from alerts.rulefile import RuleGroup, load_rule_text
from alerts.runbooks import RUNBOOKS

DEFAULT_PACK_FILE = "<default rules>"


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    throughput_below_mean_ratio: float = Field(0.30, ge=0, le=1, description="per-GPU tokens/s below fleet mean by")
    gpu_memory_ratio: float = Field(0.90, gt=0, le=1)
    gpu_memory_for: str = "10m"
    failure_rate: float = Field(0.005, gt=0, le=1)
    cost_over_budget_ratio: float = Field(0.15, ge=0, description="cost per token above budget by (warning)")
    cost_over_budget_critical_ratio: float = Field(0.50, ge=0, description="cost per token above budget by (critical)")
    cost_spike_ratio: float = Field(1.5, gt=1, description="cost per token over its 24 h mean")
    inter_token_p99_seconds: float = Field(0.050, gt=0)
    ttft_p99_seconds: float = Field(2.0, gt=0)
    e2e_p99_seconds: float = Field(30.0, gt=0)
    latency_for: str = "5m"
    utilization_target: float = Field(0.70, gt=0, le=1)
    imbalance_high: float = Field(0.90, gt=0, le=1)
    imbalance_low: float = Field(0.30, ge=0, lt=1)
    nccl_timeouts_in_15m: int = Field(1, ge=1)
    queue_scale_out: float = Field(1000, gt=0)
    idle_for: str = "30m"
    idle_utilization: float = Field(0.05, ge=0, lt=1)
    target_down_for: str = "2m"
    gpu_temperature_celsius: float = 85.0
    spend_warn_ratio: float = Field(0.8, gt=0, le=1)
    forecast_horizon_hours: float = Field(72.0, gt=0)


def _alert(name: str, expr: str, severity: str, summary: str, for_: str = "0s", **labels: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ not in ("0s", "0"):
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **labels}
    rule["annotations"] = {"summary": summary, "runbook": RUNBOOKS[name]}
    return rule


def default_rule_dicts(t: Thresholds) -> dict[str, Any]:
    low = 1 - t.throughput_below_mean_ratio
    mem = "gpu_memory_used_bytes / (gpu_memory_used_bytes + gpu_memory_free_bytes)"
    quant = "histogram_quantile(0.99, sum by (model, le) (rate({}_bucket[5m])))"
    gpu = [
        _alert(
            "GpuThroughputLow",
            f'group_ratio(gpu_generation_tokens_per_second, "model") < {low:g}',
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.host }} serves {{ $value | humanizePercentage }} of its model's mean tokens/s",
            "10m",
        ),
        _alert("GpuMemoryHigh", f"{mem} > {t.gpu_memory_ratio:g}", "warning",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} memory at {{ $value | humanizePercentage }}", t.gpu_memory_for),
        _alert("FleetUtilizationLow", f"avg(gpu_utilization_ratio) < {t.utilization_target:g}", "info",
               "Fleet GPU utilization {{ $value | humanizePercentage }} is below the target", "30m"),
        _alert(
            "GpuLoadImbalance",
            f"(count(gpu_utilization_ratio > {t.imbalance_high:g}) > 0) and on() (count(gpu_utilization_ratio < {t.imbalance_low:g}) > 0)",
            "warning",
            "{{ $value }} GPUs above the high mark while others sit below the low mark",
            "10m",
        ),
        _alert("GpuIdle", f"gpu_utilization_ratio < {t.idle_utilization:g}", "info",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} has been idle for " + t.idle_for, t.idle_for),
        _alert("GpuXidError", "increase(gpu_xid_errors_total[10m]) > 0 or changes(gpu_last_xid[10m]) > 0", "critical",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} reported XID errors"),
        _alert("GpuEccUncorrected", 'increase(gpu_ecc_errors_total{kind="uncorrected"}[10m]) > 0', "critical",
               "GPU {{ $labels.gpu }} on {{ $labels.host }}: {{ $value }} uncorrectable ECC errors"),
        _alert("GpuTemperatureHigh", f"gpu_temperature_celsius > {t.gpu_temperature_celsius:g}", "warning",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} at {{ $value }} °C", "5m"),
        _alert("NcclTimeouts", f"sum by (job, instance) (increase(nccl_timeouts_total[15m])) >= {t.nccl_timeouts_in_15m}",
               "critical", "{{ $value }} NCCL timeouts in 15 min on {{ $labels.instance }}"),
    ]
    requests = [
        _alert(
            "RequestFailureRateHigh",
            'sum by (model) (rate(inference_requests_total{outcome="failure"}[5m])) / '
            f"sum by (model) (rate(inference_requests_total[5m])) > {t.failure_rate:g}",
            "critical",
            "{{ $labels.model }}: {{ $value | humanizePercentage }} of requests fail",
            "5m",
        ),
        _alert("InterTokenLatencyHigh", f"{quant.format('inference_inter_token_latency_seconds')} > {t.inter_token_p99_seconds:g}",
               "warning", "{{ $labels.model }}: P99 inter-token latency {{ $value | humanizeDuration }}", t.latency_for),
        _alert("TimeToFirstTokenHigh", f"{quant.format('inference_time_to_first_token_seconds')} > {t.ttft_p99_seconds:g}",
               "warning", "{{ $labels.model }}: P99 time to first token {{ $value | humanizeDuration }}", t.latency_for),
        _alert("EndToEndLatencyHigh", f"{quant.format('inference_e2e_request_latency_seconds')} > {t.e2e_p99_seconds:g}",
               "warning", "{{ $labels.model }}: P99 end-to-end latency {{ $value | humanizeDuration }}", t.latency_for),
        _alert("QueueBacklog", f"sum by (model) (inference_requests_waiting) > {t.queue_scale_out:g}", "warning",
               "{{ $labels.model }}: {{ $value }} requests queued; add an instance", "1m", action="add_instance"),
        _alert("QueueIdle", "sum by (model) (inference_requests_waiting + inference_requests_running) < 1", "info",
               "{{ $labels.model }}: nothing queued or running; an instance can be released", t.idle_for,
               action="remove_instance"),
        _alert("TargetDown", "up == 0", "warning", "{{ $labels.job }} target {{ $labels.instance }} is down", t.target_down_for),
    ]
    cost = [
        _alert(
            "TokenCostOverBudget",
            f"infermeter_cost_per_million_tokens_dollars > {1 + t.cost_over_budget_ratio:g} * infermeter_budget_cost_per_million_tokens_dollars",
            "warning",
            "{{ $labels.scope }} {{ $labels.model }}: ${{ $value }} per 1M tokens is over budget",
            "15m",
        ),
        _alert(
            "TokenCostOverBudget",
            f"infermeter_cost_per_million_tokens_dollars > {1 + t.cost_over_budget_critical_ratio:g} * infermeter_budget_cost_per_million_tokens_dollars",
            "critical",
            "{{ $labels.scope }} {{ $labels.model }}: ${{ $value }} per 1M tokens is far over budget",
            "15m",
        ),
        _alert(
            "CostPerTokenSpike",
            f"infermeter_cost_per_million_tokens_dollars > {t.cost_spike_ratio:g} * avg_over_time(infermeter_cost_per_million_tokens_dollars[24h])",
            "warning",
            "{{ $labels.scope }} {{ $labels.model }}: cost per 1M tokens jumped to ${{ $value }}",
            "15m",
        ),
        _alert("SpendBudgetWarning",
               f"infermeter_spend_period_dollars > {t.spend_warn_ratio:g} * infermeter_budget_spend_period_dollars",
               "warning", "{{ $labels.scope }} {{ $labels.model }}: spend this period ${{ $value }} is past the warning level"),
        _alert("SpendBudgetExceeded", "infermeter_spend_period_dollars > infermeter_budget_spend_period_dollars", "critical",
               "{{ $labels.scope }} {{ $labels.model }}: spend this period ${{ $value }} is over budget"),
    ]
    # The forecast writes one crossing gauge per bound: the upper 80 % bound warns, the mean
    # forecast is critical (issue: "upper 80 % bound -> warn, mean -> critical").
    for kind, name, what in (("spend", "BudgetOverrunAhead", "spend crosses the period budget"),
                             ("unit_cost", "UnitCostBudgetBreachAhead", "cost per 1M tokens crosses its budget")):
        for bound, severity in (("upper80", "warning"), ("mean", "critical")):
            cost.append(_alert(
                name,
                f'infermeter_forecast_budget_crossing_hours{{kind="{kind}", bound="{bound}"}} <= {t.forecast_horizon_hours:g}',
                severity,
                "{{ $labels.scope }} {{ $labels.model }}: " + what + " in {{ $value }} h ({{ $labels.bound }} forecast)",
            ))
    return {
        "groups": [
            {"name": "infermeter-gpu", "interval": "30s", "rules": gpu},
            {"name": "infermeter-requests", "interval": "30s", "rules": requests},
            {"name": "infermeter-cost", "interval": "1m", "rules": cost},
        ]
    }


def default_rules_yaml(thresholds: Thresholds | None = None) -> str:
    return yaml.safe_dump(default_rule_dicts(thresholds or Thresholds()), sort_keys=False, allow_unicode=True, width=200)


def default_rule_groups(thresholds: Thresholds | None = None) -> list[RuleGroup]:
    return load_rule_text(default_rules_yaml(thresholds), DEFAULT_PACK_FILE)
