"""Every default rule fires past its threshold, not at or below it, and honours its `for`."""

from __future__ import annotations

import math
import re

import pytest

from alerts.defaults import default_rule_groups
from alerts.engine import RuleEngine
from alerts.thresholds import Thresholds
from store.types import SeriesKey
from tests.alerts.rule_harness import T0, SeriesFn, first_firing

GROUPS = default_rule_groups()
K = SeriesKey.of


def _gpus(metric: str, values: list[float], **extra: str) -> dict[SeriesKey, SeriesFn]:
    return {K(metric, host="n1", gpu=str(i), **extra): (lambda t, v=v: v) for i, v in enumerate(values)}


def _const(metric: str, value: float, **labels: str) -> dict[SeriesKey, SeriesFn]:
    return {K(metric, **labels): lambda t: value}


def _counter(metric: str, per_s: float, **labels: str) -> dict[SeriesKey, SeriesFn]:
    return {K(metric, **labels): lambda t: per_s * t}


def _fires(alert: str, series: dict[SeriesKey, SeriesFn], minutes: float) -> float | None:
    at, _ = first_firing(GROUPS, alert, series, minutes)
    return at


def _memory(ratio: float) -> dict[SeriesKey, SeriesFn]:
    total = 80e9
    return {**_gpus("gpu_memory_used_bytes", [total * ratio]), **_gpus("gpu_memory_free_bytes", [total * (1 - ratio)])}


def test_gpu_memory_high_sustained_10m() -> None:
    assert _fires("GpuMemoryHigh", _memory(0.90), 15) is None  # at the threshold: no
    at = _fires("GpuMemoryHigh", _memory(0.91), 15)
    assert at is not None and 600 <= at <= 630  # pending at 0, firing once 10 min have passed


def test_gpu_throughput_low_against_model_mean() -> None:
    series = lambda x: _gpus("gpu_generation_tokens_per_second", [100, 100, 100, x], model="m")  # noqa: E731
    assert _fires("GpuThroughputLow", series(66), 12) is None  # 66 / 91.5 = 0.72 of the mean
    at = _fires("GpuThroughputLow", series(63), 12)  # 63 / 90.75 = 0.694
    assert at is not None and at >= 600


def test_failure_rate_above_half_percent() -> None:
    def series(fail_share: float) -> dict[SeriesKey, SeriesFn]:
        return {
            **_counter("inference_requests_total", 100 * (1 - fail_share), model="m", outcome="success"),
            **_counter("inference_requests_total", 100 * fail_share, model="m", outcome="failure"),
        }

    assert _fires("RequestFailureRateHigh", series(0.004), 12) is None
    at = _fires("RequestFailureRateHigh", series(0.006), 12)
    assert at is not None and at >= 300


def test_cost_per_token_over_budget_by_15_percent() -> None:
    def series(ratio: float) -> dict[SeriesKey, SeriesFn]:
        return {
            **_const("infermeter_cost_per_million_tokens_dollars", 10 * ratio, scope="model", model="m"),
            **_const("infermeter_budget_cost_per_million_tokens_dollars", 10.0, scope="model", model="m"),
        }

    assert _fires("TokenCostOverBudget", series(1.14), 20) is None
    at = _fires("TokenCostOverBudget", series(1.16), 20)
    assert at is not None and at >= 900


@pytest.mark.parametrize(
    ("alert", "metric", "sla"),
    [
        ("InterTokenLatencyHigh", "inference_inter_token_latency_seconds", 0.05),
        ("TimeToFirstTokenHigh", "inference_time_to_first_token_seconds", 2.0),
        ("EndToEndLatencyHigh", "inference_e2e_request_latency_seconds", 30.0),
    ],
)
def test_p99_latency_slas(alert: str, metric: str, sla: float) -> None:
    def series(slow_share: float) -> dict[SeriesKey, SeriesFn]:
        # Observations at sla/2 except `slow_share` of them at 1.5 × sla.
        rate = 1000.0
        bounds = [sla / 2, sla, 2 * sla, math.inf]
        cum = [rate * (1 - slow_share), rate * (1 - slow_share), rate, rate]
        out: dict[SeriesKey, SeriesFn] = {}
        for le, c in zip(bounds, cum):
            out[K(f"{metric}_bucket", model="m", le="+Inf" if le == math.inf else f"{le:g}")] = lambda t, c=c: c * t
        return out

    assert _fires(alert, series(0.005), 10) is None  # P99 inside the SLA bucket
    at = _fires(alert, series(0.02), 10)
    assert at is not None and at >= 300


def test_fleet_utilization_below_target() -> None:
    assert _fires("FleetUtilizationLow", _gpus("gpu_utilization_ratio", [0.71, 0.71]), 35) is None
    at = _fires("FleetUtilizationLow", _gpus("gpu_utilization_ratio", [0.69, 0.69]), 35)
    assert at is not None and at >= 1800


def test_load_imbalance() -> None:
    assert _fires("GpuLoadImbalance", _gpus("gpu_utilization_ratio", [0.95, 0.35]), 12) is None
    assert _fires("GpuLoadImbalance", _gpus("gpu_utilization_ratio", [0.90, 0.20]), 12) is None  # 0.90 is not above
    at = _fires("GpuLoadImbalance", _gpus("gpu_utilization_ratio", [0.95, 0.20]), 12)
    assert at is not None and at >= 600


def test_nccl_timeouts() -> None:
    assert _fires("NcclTimeouts", _const("nccl_timeouts_total", 0.0, job="nccl", instance="n1", op="ALLREDUCE", rank="0"), 5) is None
    one = {K("nccl_timeouts_total", job="nccl", instance="n1", op="ALLREDUCE", rank="0"): lambda t: 0.0 if t < 120 else 1.0}
    at = _fires("NcclTimeouts", one, 5)
    assert at is not None and 120 <= at <= 180


def test_nccl_first_timeout_counts_without_a_zero_sample() -> None:
    """A counter born at 1 (as Prometheus sees it through federation) has no increase; the
    timeout's event series still counts it -- for 15 minutes after it was read, not forever."""
    labels = {"job": "nccl", "instance": "n1"}
    born = {K("nccl_timeouts_total", **labels, op="ALLREDUCE", rank=str(r)): (lambda t: math.nan if t < 120 else 1.0)
            for r in range(3)}
    assert _fires("NcclTimeouts", born, 5) is None
    events = {
        K("nccl_timeout_event_timestamp_seconds", **labels, op="ALLREDUCE", rank=str(r), seq="7"):
            (lambda t: math.nan if t < 120 else (T0 / 1000 + 120))
        for r in range(3)
    }
    at, engine = first_firing(GROUPS, "NcclTimeouts", {**born, **events}, 5)
    assert at is not None and 120 <= at <= 150
    assert [inst.value for rule, inst in engine.active() if rule.name == "NcclTimeouts"] == [3.0]
    stale = {k: (lambda t: T0 / 1000 - 3600) for k in events}  # read an hour before
    assert _fires("NcclTimeouts", {**born, **stale}, 5) is None


def test_queue_backlog_recommends_scale_out() -> None:
    assert _fires("QueueBacklog", _const("inference_requests_waiting", 1000, model="m", instance="a:1"), 3) is None
    at = _fires("QueueBacklog", _const("inference_requests_waiting", 1001, model="m", instance="a:1"), 3)
    assert at is not None and at >= 60


def test_target_down() -> None:
    assert _fires("TargetDown", _const("up", 1, job="vllm", instance="a:1"), 5) is None
    at = _fires("TargetDown", _const("up", 0, job="vllm", instance="a:1"), 5)
    assert at is not None and at >= 120


def test_gpu_idle() -> None:
    assert _fires("GpuIdle", _gpus("gpu_utilization_ratio", [0.06]), 40) is None
    at = _fires("GpuIdle", _gpus("gpu_utilization_ratio", [0.01]), 40)
    assert at is not None and at >= 1800 - 15  # needs 30 min of history below the mark


def test_xid_ecc_temperature() -> None:
    xid = {K("gpu_xid_errors_total", host="n1", gpu="0", xid="79"): lambda t: 0.0 if t < 60 else 1.0}
    assert _fires("GpuXidError", xid, 3) is not None
    assert _fires("GpuXidError", _gpus("gpu_last_xid", [0.0]), 3) is None
    ecc = {K("gpu_ecc_errors_total", host="n1", gpu="0", type="volatile", kind="uncorrected"): lambda t: 0.0 if t < 60 else 2.0}
    assert _fires("GpuEccUncorrected", ecc, 3) is not None
    corrected = {K("gpu_ecc_errors_total", host="n1", gpu="0", type="volatile", kind="corrected"): lambda t: t}
    assert _fires("GpuEccUncorrected", corrected, 3) is None
    assert _fires("GpuTemperatureHigh", _gpus("gpu_temperature_celsius", [85.0]), 8) is None
    at = _fires("GpuTemperatureHigh", _gpus("gpu_temperature_celsius", [86.0]), 8)
    assert at is not None and at >= 300


def test_spend_budget_levels() -> None:
    def series(spent: float) -> dict[SeriesKey, SeriesFn]:
        return {**_const("infermeter_spend_period_dollars", spent, scope="fleet"),
                **_const("infermeter_budget_spend_period_dollars", 1000.0, scope="fleet")}

    assert _fires("SpendBudgetWarning", series(800), 2) is None
    assert _fires("SpendBudgetWarning", series(801), 2) is not None
    assert _fires("SpendBudgetExceeded", series(1000), 2) is None
    assert _fires("SpendBudgetExceeded", series(1001), 2) is not None


def test_budget_overrun_ahead_severity_by_bound() -> None:
    series = {
        K("infermeter_forecast_budget_crossing_hours", kind="spend", bound="upper80", scope="fleet"): lambda t: 50.0,
        K("infermeter_forecast_budget_crossing_hours", kind="spend", bound="mean", scope="fleet"): lambda t: 80.0,
    }
    at, engine = first_firing(GROUPS, "BudgetOverrunAhead", series, 2)
    assert at is not None
    firing = [(r.labels["severity"], i.labels["bound"]) for r, i in engine.active() if r.name == "BudgetOverrunAhead" and i.state == "firing"]
    assert firing == [("warning", "upper80")]  # the mean crosses after 72 h: not critical


def test_cost_spike_against_24h_mean() -> None:
    day = 86_400.0
    spike = {K("infermeter_cost_per_million_tokens_dollars", scope="fleet"): lambda t: 10.0 if t < day else 16.0}
    from prometheus_client import CollectorRegistry

    from store.clock import ManualClock
    from tests.alerts.rule_harness import T0, source_of

    src = source_of(spike, day + 1800, step_s=60.0)
    clock = ManualClock(T0)
    engine = RuleEngine(GROUPS, src, clock, CollectorRegistry())
    group = next(g for g in GROUPS if g.name == "infermeter-cost")
    fired = None
    for t in range(int(day) - 600, int(day) + 1800, 60):
        engine.evaluate_group(group, T0 + t * 1000)
        if any(r.name == "CostPerTokenSpike" and i.state == "firing" for r, i in engine.active()):
            fired = t
            break
    assert fired is not None and day + 900 <= fired <= day + 960


def test_thresholds_are_configurable() -> None:
    groups = default_rule_groups(Thresholds(gpu_memory_ratio=0.5, gpu_memory_for="1m"))
    at, _ = first_firing(groups, "GpuMemoryHigh", _memory(0.6), 3)
    assert at is not None and 60 <= at <= 90


def test_cost_per_token_critical_level() -> None:
    def series(ratio: float) -> dict[SeriesKey, SeriesFn]:
        return {
            **_const("infermeter_cost_per_million_tokens_dollars", 10 * ratio, scope="fleet"),
            **_const("infermeter_budget_cost_per_million_tokens_dollars", 10.0, scope="fleet"),
        }

    def severities(ratio: float) -> list[str]:
        _, engine = first_firing(GROUPS, "never", series(ratio), 16)
        return sorted(i.labels["severity"] for r, i in engine.active() if r.name == "TokenCostOverBudget" and i.state == "firing")

    assert severities(1.49) == ["warning"]
    assert severities(1.51) == ["critical", "warning"]


@pytest.mark.parametrize("value", [1.1100400002797444, 6.18384371779538, 0.8123456789, 2.0, 1e-7])
def test_every_default_annotation_reads_well(value: float) -> None:
    """No raw float digits, no dangling scope ("fleet :"), no unrendered template."""
    from alerts.template import render

    fleet = {"scope": "fleet", "model": "", "host": "n1", "gpu": "0", "instance": "n1:9400", "job": "nccl", "bound": "mean"}
    model = {**fleet, "scope": "model", "model": "llama-3.1-8b"}
    for group in GROUPS:
        for rule in group.rules:
            for labels in (fleet, model):
                for text in rule.annotations.values():
                    shown = render(text, labels, value)
                    assert not re.search(r"\d\.\d{5,}", shown), (rule.name, shown)
                    assert " :" not in shown and "{{" not in shown and not shown.startswith(":"), (rule.name, shown)
