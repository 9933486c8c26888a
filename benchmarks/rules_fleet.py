"""The synthetic fleet of :mod:`benchmarks.rules_bench`: 1,024 GPUs (8 per node, 128 workers, 4 models) with
canonical series every 15 s, and planted faults so that most default rules have something to
fire on. Deterministic for a seed; values are produced a whole time step at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from store.types import SeriesKey

NODES, GPUS_PER_NODE, MODELS = 128, 8, 4
STEP_MS = 15_000
BUCKETS = ("0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.25", "0.5", "1", "2.5", "5", "+Inf")
HISTOGRAMS = (
    "inference_inter_token_latency_seconds",
    "inference_time_to_first_token_seconds",
    "inference_e2e_request_latency_seconds",
)
FIXED_LE = np.asarray([float(b.replace("+Inf", "inf")) for b in BUCKETS])


@dataclass
class FleetSeries:
    keys: list[SeriesKey] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # how each series moves: gauge | counter
    base: list[float] = field(default_factory=list)  # gauge level, or counter rate per second

    def add(self, key: SeriesKey, kind: str, base: float) -> None:
        self.keys.append(key)
        self.kinds.append(kind)
        self.base.append(base)


def model_of(node: int) -> str:
    return f"model-{node % MODELS}"


def build_fleet() -> FleetSeries:
    s = FleetSeries()
    for node in range(NODES):
        host = f"gpu-node-{node:03d}"
        model = model_of(node)
        worker = {"job": "vllm", "instance": f"{host}:8000"}
        for gpu in range(GPUS_PER_NODE):
            g = {"host": host, "gpu": str(gpu), "gpu_model": "NVIDIA H100 80GB HBM3"}
            util = 0.75
            if node == 5:
                util = 0.95 if gpu < 4 else 0.2  # imbalance
            s.add(SeriesKey.of("gpu_utilization_ratio", g), "gauge", util)
            used = 0.95 if (node, gpu) == (7, 3) else 0.6  # memory high
            s.add(SeriesKey.of("gpu_memory_used_bytes", g), "gauge", used * 80e9)
            s.add(SeriesKey.of("gpu_memory_free_bytes", g), "gauge", (1 - used) * 80e9)
            s.add(SeriesKey.of("gpu_temperature_celsius", g), "gauge", 90.0 if (node, gpu) == (9, 1) else 62.0)
            s.add(SeriesKey.of("gpu_power_watts", g), "gauge", 500.0)
            s.add(SeriesKey.of("gpu_energy_joules_total", g), "counter", 500.0)
            s.add(SeriesKey.of("gpu_ecc_errors_total", {**g, "type": "volatile", "kind": "uncorrected"}), "counter",
                  0.01 if (node, gpu) == (30, 0) else 0.0)
            s.add(SeriesKey.of("gpu_last_xid", g), "gauge", 0.0)
            tps = 50.0 if node == 11 else 100.0  # throughput low on a node
            s.add(SeriesKey.of("gpu_generation_tokens_per_second", {"host": host, "gpu": str(gpu), "model": model, **worker}),
                  "gauge", tps)
        fail = 0.01 if model == "model-1" else 0.001
        w = {**worker, "model": model}
        s.add(SeriesKey.of("inference_requests_total", {**w, "outcome": "success"}), "counter", 10 * (1 - fail))
        s.add(SeriesKey.of("inference_requests_total", {**w, "outcome": "failure"}), "counter", 10 * fail)
        s.add(SeriesKey.of("inference_prompt_tokens_total", w), "counter", 4000.0)
        s.add(SeriesKey.of("inference_generation_tokens_total", w), "counter", 800.0)
        s.add(SeriesKey.of("inference_requests_waiting", w), "gauge", 40.0 if model == "model-3" else 2.0)
        s.add(SeriesKey.of("inference_requests_running", w), "gauge", 16.0)
        for hist in HISTOGRAMS:
            slow = hist.startswith("inference_inter") and model == "model-2"
            # cumulative share of observations under each bound
            centre = {"inference_inter_token_latency_seconds": 0.02, "inference_time_to_first_token_seconds": 0.3,
                      "inference_e2e_request_latency_seconds": 2.0}[hist] * (4 if slow else 1)
            shares = np.clip(1 - np.exp(-FIXED_LE / centre), 0, 1)
            shares[-1] = 1.0
            for le, share in zip(BUCKETS, shares):
                s.add(SeriesKey.of(f"{hist}_bucket", {**w, "le": le}), "counter", 800.0 * float(share))
        s.add(SeriesKey.of("up", worker), "gauge", 0.0 if node == 20 else 1.0)
        s.add(SeriesKey.of("nccl_timeouts_total", {"job": "nccl", "instance": host, "op": "ALLREDUCE", "rank": "0"}),
              "counter", 0.002 if node == 40 else 0.0)
    for m in range(MODELS):
        scope = {"scope": "model", "model": f"model-{m}"}
        s.add(SeriesKey.of("infermeter_cost_per_million_tokens_dollars", scope), "cost", 1.3 if m == 0 else 0.8)
        s.add(SeriesKey.of("infermeter_budget_cost_per_million_tokens_dollars", scope), "gauge", 1.0)
    s.add(SeriesKey.of("infermeter_spend_period_dollars", {"scope": "fleet"}), "gauge", 850.0)
    s.add(SeriesKey.of("infermeter_budget_spend_period_dollars", {"scope": "fleet"}), "gauge", 1000.0)
    return s


def values_at(fleet: FleetSeries, step: int, t_ms: int, spike_from_ms: int, rng: np.random.Generator) -> np.ndarray:
    """Every series' value at step ``step`` (time ``t_ms``)."""
    kinds = np.asarray(fleet.kinds)
    base = np.asarray(fleet.base)
    out = np.empty(len(base))
    gauge = kinds == "gauge"
    # gauges wobble by ±1 % (binary flags such as up stay exact)
    noise = 1 + 0.01 * np.sin(step * 0.37 + np.arange(len(base)) * 0.11)
    out[gauge] = np.where(np.isin(base[gauge], (0.0, 1.0)), base[gauge], base[gauge] * noise[gauge])
    counter = kinds == "counter"
    out[counter] = base[counter] * step * STEP_MS / 1000
    cost = kinds == "cost"
    out[cost] = base[cost] * (2.0 if t_ms >= spike_from_ms else 1.0)  # a cost spike in the last 30 min
    return out
