"""The default rule pack: every threshold of MISSION.md as a rule over canonical metric names,
each value configurable through :class:`Thresholds` (``alerts.thresholds`` in the config).

The pack is produced as ordinary rule-file YAML, so ``infermeter rules export-prometheus``
and ``rules check`` treat it exactly like a user's file.
"""

from __future__ import annotations

from typing import Any

import yaml

from alerts import drift_rules, moe_rules
from alerts.rulefile import RuleGroup, load_rule_text
from alerts.runbooks import RUNBOOKS
from alerts.thresholds import Thresholds

DEFAULT_PACK_FILE = "<default rules>"


# "fleet" when a cost series is fleet-wide (its model label is empty), else the model.
SCOPE = "{{ if $labels.model }}{{ $labels.model }}{{ else }}fleet{{ end }}"
DOLLARS = '${{ printf "%.2f" $value }}'
COUNT = '{{ printf "%.0f" $value }}'
# TGI serves one model and exports no model label: its series sum to model="".
MODEL = "{{ if $labels.model }}{{ $labels.model }}{{ else }}unlabelled model{{ end }}"


def _alert(
    name: str, expr: str, severity: str, summary: str, for_: str = "0s", keep: str = "0s", **labels: str
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ not in ("0s", "0"):
        rule["for"] = for_
    if keep not in ("0s", "0"):
        rule["keep_firing_for"] = keep
    rule["labels"] = {"severity": severity, **labels}
    rule["annotations"] = {"summary": summary, "runbook": RUNBOOKS[name]}
    return rule


def default_rule_dicts(t: Thresholds) -> dict[str, Any]:
    low = 1 - t.throughput_below_mean_ratio
    keep, idle_keep = t.keep_firing_for, t.idle_keep_firing_for
    mem = "gpu_memory_used_bytes / (gpu_memory_used_bytes + gpu_memory_free_bytes)"
    quant = "histogram_quantile(0.99, sum by (model, le) (rate({}_bucket[5m])))"
    gpu = [
        _alert(
            "GpuThroughputLow",
            f'group_ratio(gpu_generation_tokens_per_second, "model") < {low:g}',
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.host }} serves {{ $value | humanizePercentage }} of its model's mean tokens/s",
            "10m",
            keep,
        ),
        _alert("GpuMemoryHigh", f"{mem} > {t.gpu_memory_ratio:g}", "warning",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} memory at {{ $value | humanizePercentage }}", t.gpu_memory_for, keep),
        # Utilization is bursty (a busy minute between idle ones, a health check's blip in an idle
        # stretch): the fleet and idle checks look at 10-minute averages, so a blip does not restart
        # their `for`, and hold through a burst of work (idle_keep_firing_for), so a GPU that idles
        # between bursts is reported once per idle stretch, not once per lull.
        _alert("FleetUtilizationLow", f"avg(avg_over_time(gpu_utilization_ratio[10m])) < {t.utilization_target:g}", "info",
               "Fleet GPU utilization {{ $value | humanizePercentage }} is below the target", "30m", idle_keep),
        _alert(
            "GpuLoadImbalance",
            f"(count(avg_over_time(gpu_utilization_ratio[30m]) > {t.imbalance_high:g}) > 0) and on() "
            f"(count(avg_over_time(gpu_utilization_ratio[30m]) < {t.imbalance_low:g}) > 0)",
            "warning",
            COUNT + " GPUs averaged above the high mark over 30 min while others sat below the low mark",
            "10m",
            "30m",
        ),
        _alert("GpuIdle", f"avg_over_time(gpu_utilization_ratio[10m]) < {t.idle_utilization:g}", "info",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} has been idle (under " + f"{t.idle_utilization:.0%}" + ") for "
               + t.idle_for + "; it can be released", t.idle_for, idle_keep),
        _alert("GpuXidError", "increase(gpu_xid_errors_total[10m]) > 0 or changes(gpu_last_xid[10m]) > 0", "critical",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} reported XID errors"),
        _alert("GpuEccUncorrected", 'increase(gpu_ecc_errors_total{kind="uncorrected"}[10m]) > 0', "critical",
               "GPU {{ $labels.gpu }} on {{ $labels.host }}: " + COUNT + " uncorrectable ECC errors in 10 min"),
        _alert("GpuTemperatureHigh", f"gpu_temperature_celsius > {t.gpu_temperature_celsius:g}", "warning",
               "GPU {{ $labels.gpu }} on {{ $labels.host }} at " + COUNT + " °C", "5m", keep),
        # The first timeout of an (op, rank) usually kills the job, so it must count: our store
        # has a zero sample before each counter's first value (increase sees it); a Prometheus
        # that federates the counter sees it born at 1, so the timeout events (one series per
        # timeout, valued when it was read) count it there -- and survive a Prometheus restart,
        # where "new since 15 min ago" would page for every old counter.
        _alert("NcclTimeouts",
               f"sum by (job, instance) (increase(nccl_timeouts_total[15m])) >= {t.nccl_timeouts_in_15m} or "
               f"count by (job, instance) (time() - nccl_timeout_event_timestamp_seconds <= 900) >= {t.nccl_timeouts_in_15m}",
               "critical", COUNT + " NCCL timeouts in 15 min on {{ $labels.instance }}"),
    ]
    requests = [
        _alert(
            "RequestFailureRateHigh",
            'sum by (model) (rate(inference_requests_total{outcome="failure"}[5m])) / '
            f"sum by (model) (rate(inference_requests_total[5m])) > {t.failure_rate:g}",
            "critical",
            MODEL + ": {{ $value | humanizePercentage }} of requests fail",
            "5m",
            keep,
        ),
        _alert("InterTokenLatencyHigh", f"{quant.format('inference_inter_token_latency_seconds')} > {t.inter_token_p99_seconds:g}",
               "warning", MODEL + ": P99 inter-token latency {{ $value | humanizeDuration }}", t.latency_for, keep),
        _alert("TimeToFirstTokenHigh", f"{quant.format('inference_time_to_first_token_seconds')} > {t.ttft_p99_seconds:g}",
               "warning", MODEL + ": P99 time to first token {{ $value | humanizeDuration }}", t.latency_for, keep),
        _alert("EndToEndLatencyHigh", f"{quant.format('inference_e2e_request_latency_seconds')} > {t.e2e_p99_seconds:g}",
               "warning", MODEL + ": P99 end-to-end latency {{ $value | humanizeDuration }}", t.latency_for, keep),
        _alert("QueueBacklog", f"sum by (model) (inference_requests_waiting) > {t.queue_scale_out:g}", "warning",
               MODEL + ": " + COUNT + " requests queued; add an instance", "1m", keep, action="add_instance"),
        # The most that was queued or running at any moment of the last 5 minutes: a request now
        # and then keeps the model busy, so light traffic does not flap pending <-> inactive.
        _alert("QueueIdle",
               "sum by (model) (max_over_time(inference_requests_waiting[5m]) "
               "+ max_over_time(inference_requests_running[5m])) < 1", "info",
               MODEL + ": nothing queued or running for " + t.idle_for + "; an instance can be released",
               t.idle_for, idle_keep, action="remove_instance"),
        _alert("TargetDown", "up == 0", "warning", "{{ $labels.job }} target {{ $labels.instance }} is down", t.target_down_for),
    ]
    cost = [
        _alert(
            "TokenCostOverBudget",
            f"infermeter_cost_per_million_tokens_dollars > {1 + t.cost_over_budget_ratio:g} * infermeter_budget_cost_per_million_tokens_dollars",
            "warning",
            SCOPE + ": " + DOLLARS + " per 1M tokens is over budget",
            "15m",
            keep,
        ),
        _alert(
            "TokenCostOverBudget",
            f"infermeter_cost_per_million_tokens_dollars > {1 + t.cost_over_budget_critical_ratio:g} * infermeter_budget_cost_per_million_tokens_dollars",
            "critical",
            SCOPE + ": " + DOLLARS + " per 1M tokens is far over budget",
            "15m",
            keep,
        ),
        _alert(
            "CostPerTokenSpike",
            f"infermeter_cost_per_million_tokens_dollars > {t.cost_spike_ratio:g} * avg_over_time(infermeter_cost_per_million_tokens_dollars[24h])",
            "warning",
            SCOPE + ": cost per 1M tokens jumped to " + DOLLARS,
            "15m",
            keep,
        ),
        _alert("SpendBudgetWarning",
               f"infermeter_spend_period_dollars > {t.spend_warn_ratio:g} * infermeter_budget_spend_period_dollars",
               "warning", SCOPE + ": spend this period " + DOLLARS + " is past the warning level"),
        _alert("SpendBudgetExceeded", "infermeter_spend_period_dollars > infermeter_budget_spend_period_dollars", "critical",
               SCOPE + ": spend this period " + DOLLARS + " is over budget"),
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
                SCOPE + ": " + what + " in " + COUNT + " h ({{ $labels.bound }} forecast)",
            ))
    return {
        "groups": [
            {"name": "infermeter-gpu", "interval": "30s", "rules": gpu},
            {"name": "infermeter-requests", "interval": "30s", "rules": requests},
            {"name": "infermeter-cost", "interval": "1m", "rules": cost},
            {"name": "infermeter-moe", "interval": "1m", "rules": [*moe_rules.recording_rules(t), *moe_rules.alert_rules(t, _alert)]},
            {"name": "infermeter-moe-unused", "interval": "1h", "rules": moe_rules.unused_rules(t, _alert)},
            {"name": "infermeter-drift", "interval": "1m", "rules": drift_rules.alert_rules(t, _alert)},
        ]
    }


def default_rules_yaml(thresholds: Thresholds | None = None) -> str:
    return yaml.safe_dump(default_rule_dicts(thresholds or Thresholds()), sort_keys=False, allow_unicode=True, width=200)


def default_rule_groups(thresholds: Thresholds | None = None) -> list[RuleGroup]:
    return load_rule_text(default_rules_yaml(thresholds), DEFAULT_PACK_FILE)
