"""The default rule pack's thresholds (``alerts.thresholds`` in the config), apart from the pack
itself so that reading a config does not load the rule parser and PromQL (the agent reads one)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# NCCL / PyTorch settings compared across the nodes of a group by default (seed 000 §4.2, 004 §6).
DEFAULT_WATCHED = (
    "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_TOPO_FILE", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE",
    "NCCL_NET_GDR_LEVEL", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
)


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    throughput_below_mean_ratio: float = Field(0.30, ge=0, le=1, description="per-GPU tokens/s below fleet mean by")
    gpu_memory_ratio: float = Field(0.90, gt=0, le=1, description="GPU memory used over total, sustained for gpu_memory_for")
    gpu_memory_for: str = Field("10m", description="how long GPU memory stays above gpu_memory_ratio (duration)")
    failure_rate: float = Field(0.005, gt=0, le=1, description="failed requests over all requests of a model")
    cost_over_budget_ratio: float = Field(0.15, ge=0, description="cost per token above budget by (warning)")
    cost_over_budget_critical_ratio: float = Field(0.50, ge=0, description="cost per token above budget by (critical)")
    cost_spike_ratio: float = Field(1.5, gt=1, description="cost per token over its 24 h mean")
    inter_token_p99_seconds: float = Field(0.050, gt=0, description="P99 inter-token latency SLA")
    ttft_p99_seconds: float = Field(2.0, gt=0, description="P99 time-to-first-token SLA")
    e2e_p99_seconds: float = Field(30.0, gt=0, description="P99 end-to-end request latency SLA")
    latency_for: str = Field("5m", description="how long a latency SLA is broken before it alerts (duration)")
    utilization_target: float = Field(0.70, gt=0, le=1, description="fleet mean GPU utilization below this is low")
    imbalance_high: float = Field(0.90, gt=0, le=1, description="imbalance: some GPUs above this while others are below imbalance_low")
    imbalance_low: float = Field(0.30, ge=0, lt=1, description="the low mark of the load imbalance alert")
    nccl_timeouts_in_15m: int = Field(1, ge=1, description="NCCL timeouts within 15 minutes on one instance")
    queue_scale_out: float = Field(1000, gt=0, description="queued requests of a model -> add_instance recommendation")
    idle_for: str = Field("30m", description="how long a GPU or a model's queue stays idle before it alerts (duration)")
    idle_utilization: float = Field(0.05, ge=0, lt=1, description="GPU utilization below this is idle")
    target_down_for: str = Field("2m", description="how long a scrape target is down before it alerts (duration)")
    gpu_temperature_celsius: float = Field(85.0, description="GPU temperature above this for 5m warns")
    spend_warn_ratio: float = Field(0.8, gt=0, le=1, description="spend this period over its budget that warns")
    forecast_horizon_hours: float = Field(72.0, gt=0, description="alert when the forecast crosses a budget within this many hours")
    moe_max_over_mean: float = Field(
        2.0, gt=1, description="MoE: the busiest expert of a layer over the layer's mean load, sustained 10 min")
    moe_js_divergence: float = Field(
        0.05, gt=0, le=1, description="MoE: Jensen-Shannon divergence (bits) of a layer's routing from uniform, "
        "sustained 10 min")
    moe_unused_window: str = Field(
        "1d", description="MoE: an expert with no token over this window is unused (a pruning candidate once it "
        "stays so for 7 days; duration)")
    drift_nccl_settings: list[str] = Field(
        default_factory=lambda: list(DEFAULT_WATCHED),
        description="NCCL_* / TORCH_NCCL_* settings that must match across the nodes of a group (the NCCL log "
        "collector also reports them as unset where a node lacks them)")
    keep_firing_for: str = Field(
        "10m", description="how long a GPU, request or cost alert keeps firing after its condition clears, so a "
        "value hovering at its threshold does not page again and again (Prometheus keep_firing_for; duration)")
    idle_keep_firing_for: str = Field(
        "2h", description="how long GpuIdle / QueueIdle / FleetUtilizationLow keep firing through a burst of work: "
        "on bursty duty cycles an idle alert then fires once per idle stretch, not once per lull (duration)")
