"""A synthetic GPU inference fleet under canonical metric names, generated columnar and in time
order (for the dashboard's browser tests and ``benchmarks/dashboard_bench.py``).

Per GPU (8 per node): utilization, memory used / free, power, temperature, the energy counter,
the last XID and ECC counters; optionally ``gpu_generation_tokens_per_second`` (otherwise the
cost ledger derives it). Per node: one vLLM-shaped inference target serving one model
(requests by outcome, prompt / generated tokens, running / waiting, KV cache, TTFT,
inter-token and end-to-end histograms, HTTP 5xx) and NCCL series (Inspector bus bandwidth by
operation and message size, two nccl-tests runs -- node 0 alone and, with two nodes or more,
nodes 0 and 1 together -- watchdog timeouts with their event series, warnings).

Planted events, relative to the end of the data: GPU 1 of node 0 reports XID 79 20 min
before the end (and XID 48 on GPU 2 of node 0, 6 min before the end); GPU 2 of node 1 an
uncorrectable ECC error 5 min before; node 0's NCCL rank 3 times out 8 min before (an
``nccl_timeout_event_timestamp_seconds`` series from then on, naming rank 5 as lagging); GPU 3 of
node 0 serves a third fewer tokens (a throughput outlier); GPU 0 of node 1 runs hot (89 °C).
Node 0's model routes tokens over 2 MoE layers of 8 experts: layer 1 sends three times its share
to expert 0 and nothing to expert 7. Node 0 upgrades NCCL half way through the data; with three
nodes or more, the last one runs another driver.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from store.types import STALE_NAN, SampleBatch, SeriesKey

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
GIB = 2.0**30
TOTAL_MEMORY = 80 * GIB
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, math.inf)
HISTOGRAMS = {  # median seconds by model index, log-normal sigma
    "inference_time_to_first_token_seconds": ((0.25, 0.6), 0.6),
    "inference_inter_token_latency_seconds": ((0.018, 0.035), 0.4),
    "inference_e2e_request_latency_seconds": ((4.0, 8.0), 0.5),
}
MINUTE_MS = 60_000
MOE_LAYERS, MOE_EXPERTS = 2, 8


@dataclass(frozen=True)
class FleetShape:
    nodes: int = 2
    gpus_per_node: int = 4
    models: tuple[str, ...] = ("llama-3-70b", "qwen2-7b")
    scrape_ms: int = 15_000
    requests_per_second: float = 6.0  # per node, before the daily swing
    per_gpu_tokens: bool = False  # write gpu_generation_tokens_per_second (else the ledger does)
    nccl: bool = True
    moe: bool = True  # node 0's model routes over 2 layers x 8 experts (layer 1: expert 0 hot, 7 unused)
    software: bool = True  # versions and NCCL settings per node (the last node: another driver)
    seed: int = 7


def host_of(node: int) -> str:
    return f"gpu-node-{node:02d}"


def model_of(shape: FleetShape, node: int) -> str:
    return shape.models[node % len(shape.models)]


def _phi(x: F64) -> F64:
    """Standard normal CDF (Abramowitz and Stegun 7.1.26 for erf; error < 1.5e-7)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-z * z)
    return np.asarray(0.5 * (1.0 + np.sign(x) * erf), np.float64)


class SyntheticFleet:
    def __init__(self, shape: FleetShape, start_ms: int, end_ms: int) -> None:
        self.shape = shape
        self.start_ms = start_ms - start_ms % shape.scrape_ms
        self.end_ms = end_ms
        self.n_points = (end_ms - self.start_ms) // shape.scrape_ms + 1
        self.keys: list[SeriesKey] = []
        self._index: dict[str, list[int]] = {}
        self._build_keys()

    # -- series ------------------------------------------------------------------------------
    def _add(self, role: str, metric: str, /, **labels: str) -> None:
        self._index.setdefault(role, []).append(len(self.keys))
        self.keys.append(SeriesKey.of(metric, labels))

    def gpus(self) -> list[tuple[int, int]]:
        return [(n, g) for n in range(self.shape.nodes) for g in range(self.shape.gpus_per_node)]

    def _build_keys(self) -> None:
        s = self.shape
        for node, gpu in self.gpus():
            base = {"host": host_of(node), "gpu": str(gpu), "uuid": f"GPU-{node:04d}-{gpu:04d}",
                    "gpu_model": "NVIDIA H100 80GB HBM3", "job": "dcgm", "instance": f"{host_of(node)}:9400"}
            self._add("util", "gpu_utilization_ratio", **base)
            self._add("mem_used", "gpu_memory_used_bytes", **base)
            self._add("mem_free", "gpu_memory_free_bytes", **base)
            self._add("power", "gpu_power_watts", **base)
            self._add("temp", "gpu_temperature_celsius", **base)
            self._add("energy", "gpu_energy_joules_total", **base)
            self._add("xid", "gpu_last_xid", **base)
            self._add("ecc_unc", "gpu_ecc_errors_total", **base, type="volatile", kind="uncorrected")
            self._add("ecc_cor", "gpu_ecc_errors_total", **base, type="volatile", kind="corrected")
            if s.per_gpu_tokens:
                self._add("gpu_tokens", "gpu_generation_tokens_per_second", host=host_of(node), gpu=str(gpu),
                          model=model_of(s, node), job="vllm", instance=f"{host_of(node)}:8000")
        for node in range(s.nodes):
            base = {"job": "vllm", "instance": f"{host_of(node)}:8000", "engine": "vllm", "model": model_of(s, node)}
            for outcome in ("success", "failure", "abort"):
                self._add(f"req_{outcome}", "inference_requests_total", **base, outcome=outcome)
            self._add("prompt", "inference_prompt_tokens_total", **base)
            self._add("generated", "inference_generation_tokens_total", **base)
            self._add("running", "inference_requests_running", **base)
            self._add("waiting", "inference_requests_waiting", **base)
            self._add("kv", "inference_kv_cache_usage_ratio", **base)
            self._add("http5xx", "inference_http_server_errors_total", **base)
            for metric in HISTOGRAMS:
                for le in BUCKETS:
                    self._add(f"hist:{metric}", f"{metric}_bucket", **base, le="+Inf" if le == math.inf else f"{le:g}")
        if s.nccl:
            for node in range(s.nodes):
                base = {"job": "nccl", "instance": f"{host_of(node)}:nccl"}
                for op in ("AllReduce", "AllGather"):
                    for size in (1 << 20, 16 << 20, 256 << 20):
                        self._add("busbw", "nccl_collective_bus_bandwidth_bytes_per_second", **base, op=op,
                                  size_bytes=str(size), rank=str(node * s.gpus_per_node))
                self._add("timeouts", "nccl_timeouts_total", **base, op="ALLREDUCE", rank=str(node * s.gpus_per_node + 3))
                self._add("warnings", "nccl_warnings_total", **base, source="transport/net_ib.cc")
            self._add("timeout_event", "nccl_timeout_event_timestamp_seconds", job="nccl", instance=f"{host_of(0)}:nccl",
                      op="ALLREDUCE", rank="3", seq="73104", timeout_ms="600000", ran_for_ms="600031", lagging_ranks="5")
            for nodes in range(1, min(2, s.nodes) + 1):
                run = {"run": f"all_reduce_perf_{nodes}node", "host": host_of(0), "nodes": str(nodes),
                       "nranks": str(nodes * s.gpus_per_node)}
                for size in (1 << 20, 16 << 20, 256 << 20):
                    self._add("tests_busbw", "nccl_tests_bus_bandwidth_bytes_per_second", job="nccl",
                              instance=f"{host_of(0)}:nccl", op="all_reduce", size_bytes=str(size), inplace="false", **run)

        if s.moe:
            for layer in range(MOE_LAYERS):
                for expert in range(MOE_EXPERTS):
                    self._add("moe", "moe_expert_tokens_total", job="vllm", instance=f"{host_of(0)}:8000",
                              model=model_of(s, 0), layer=str(layer), expert=str(expert))
            for part in ("sum", "count"):  # vLLM's EPLB step reports, one per scrape, balancedness 0.6
                self._add(f"bal_{part}", f"moe_balancedness_{part}", job="nccl", instance=f"{host_of(0)}:nccl",
                          model=model_of(s, 0))
        if s.software:
            for node in range(s.nodes):
                host = host_of(node)
                driver = "535.104.05" if node == s.nodes - 1 and s.nodes > 2 else "550.54.15"
                self._add("info", "node_software_info", job="gpu", instance=host, host=host, component="driver",
                          version=driver)
                self._add("info_until_upgrade" if node == 0 else "info", "node_software_info", job="nccl",
                          instance=host, host=host, component="nccl", version="2.21.5")
                if node == 0:  # node 0 upgrades NCCL half way through the data
                    self._add("info_after_upgrade", "node_software_info", job="nccl", instance=host, host=host,
                              component="nccl", version="2.23.4")
                self._add("info", "node_software_info", job="vllm", instance=f"{host}:8000", component="engine",
                          engine="vllm", version="0.10.1")
                self._add("info", "nccl_env_info", job="nccl", instance=host, host=host,
                          name="TORCH_NCCL_BLOCKING_WAIT", value="1")

    # -- values ------------------------------------------------------------------------------
    def batches(self, points_per_batch: int = 240) -> Iterator[SampleBatch]:
        """Time-major batches of ``points_per_batch`` scrapes each, oldest first."""
        state = _State(self)
        n = len(self.keys)
        key_index = np.tile(np.arange(n, dtype=np.int64), points_per_batch)
        for lo in range(0, self.n_points, points_per_batch):
            hi = min(lo + points_per_batch, self.n_points)
            ts = self.start_ms + np.arange(lo, hi, dtype=np.int64) * self.shape.scrape_ms
            values = state.step(ts)  # [series, time]
            m = (hi - lo) * n
            yield SampleBatch(self.keys, key_index[:m], np.repeat(ts, n), np.ascontiguousarray(values.T).reshape(-1))

    @property
    def samples(self) -> int:
        return self.n_points * len(self.keys)


class _State:
    """Random walks and counters carried from batch to batch."""

    def __init__(self, fleet: SyntheticFleet) -> None:
        self.fleet = fleet
        self.s = fleet.shape
        self.rng = np.random.default_rng(self.s.seed)
        self.idx = {k: np.asarray(v, np.int64) for k, v in fleet._index.items()}
        n_gpu = len(fleet.gpus())
        self.util_dev = np.zeros(n_gpu)
        self.mem = np.full(n_gpu, 52 * GIB)
        self.counters = np.zeros(len(fleet.keys))
        self.running = np.full(self.s.nodes, 18.0)
        self.waiting = np.full(self.s.nodes, 4.0)
        self.kv = np.full(self.s.nodes, 0.5)
        gpus = fleet.gpus()
        self.slow = np.asarray([(n, g) == (0, 3) for n, g in gpus])
        hot_gpu = (1, 0) if self.s.nodes > 1 else (0, 0)
        self.hot = np.asarray([(n, g) == hot_gpu for n, g in gpus])
        self.node_of_gpu = np.asarray([n for n, _ in gpus])
        self.model_index = np.asarray([n % len(self.s.models) for n in range(self.s.nodes)])

    def _walk(self, level: F64, k: int, sd: float, lo: float, hi: float, target: F64, pull: float = 0.05) -> F64:
        out = np.empty((len(level), k))
        noise = self.rng.normal(0, sd, (len(level), k))
        for j in range(k):
            level = np.clip(level + noise[:, j] + pull * (target - level), lo, hi)
            out[:, j] = level
        return out

    def step(self, ts: I64) -> F64:
        f, s, k = self.fleet, self.s, len(ts)
        out = np.zeros((len(f.keys), k))
        day = 0.5 + 0.5 * np.sin((ts % 86_400_000) / 86_400_000 * 2 * np.pi - np.pi / 2)  # 0 at midnight, 1 at noon
        dt = s.scrape_ms / 1000
        # GPUs
        target_util = np.where(self.slow, 0.45, 0.55)[:, None] + 0.35 * day[None, :]
        dev = self._walk(self.util_dev, k, 0.02, -0.3, 0.3, np.zeros(len(self.util_dev)))
        self.util_dev = dev[:, -1]
        util = np.clip(target_util + dev, 0.02, 1.0)
        mem = self._walk(self.mem, k, 0.2 * GIB, 20 * GIB, 76 * GIB, np.full(len(self.mem), 52 * GIB))
        self.mem = mem[:, -1]
        out[self.idx["util"]] = np.round(util, 2)
        out[self.idx["mem_used"]] = np.round(mem / 2**20) * 2**20
        out[self.idx["mem_free"]] = TOTAL_MEMORY - out[self.idx["mem_used"]]
        power = 90 + 560 * util + self.rng.normal(0, 6, util.shape)
        out[self.idx["power"]] = np.round(power, 1)
        temp = np.where(self.hot[:, None], 89.0, 38 + 38 * util) + self.rng.normal(0, 0.4, util.shape)
        out[self.idx["temp"]] = np.round(temp)
        energy = self.counters[self.idx["energy"]][:, None] + np.cumsum(power * dt, axis=1)
        out[self.idx["energy"]] = energy
        end = f.end_ms
        xid = np.zeros(util.shape)
        gpus = f.gpus()
        for i, (node, gpu) in enumerate(gpus):
            if (node, gpu) == (0, 1):
                xid[i] = np.where(ts >= end - 20 * MINUTE_MS, 79.0, 0.0)
            if (node, gpu) == (0, 2):
                xid[i] = np.where(ts >= end - 6 * MINUTE_MS, 48.0, 0.0)
        out[self.idx["xid"]] = xid
        unc = np.zeros(util.shape)
        for i, (node, gpu) in enumerate(gpus):
            if (node, gpu) == (min(1, s.nodes - 1), 2):
                unc[i] = np.where(ts >= end - 5 * MINUTE_MS, 1.0, 0.0)
        out[self.idx["ecc_unc"]] = unc
        out[self.idx["ecc_cor"]] = self.counters[self.idx["ecc_cor"]][:, None] + np.cumsum(
            self.rng.random(util.shape) < 0.001, axis=1)
        # Inference, per node
        rps = s.requests_per_second * (0.4 + 0.6 * day)[None, :] * np.ones((s.nodes, 1))
        rps = rps * (1 + self.rng.normal(0, 0.05, rps.shape))
        reqs = np.clip(rps, 0, None) * dt
        failure_share = np.where(np.arange(s.nodes) == 0, 0.012, 0.002)[:, None]
        node_gpu_util = np.vstack([util[self.node_of_gpu == n].mean(axis=0) for n in range(s.nodes)])
        tokens_per_req = 250.0 * np.where(np.arange(s.nodes) == 0, 0.95, 1.0)[:, None]
        gen = reqs * tokens_per_req * (0.6 + 0.4 * node_gpu_util)
        parts = {"req_success": reqs * (1 - failure_share - 0.001), "req_failure": reqs * failure_share,
                 "req_abort": reqs * 0.001, "prompt": reqs * 600.0, "generated": gen,
                 "http5xx": reqs * 0.0005}
        for name, inc in parts.items():
            ids = self.idx[name]
            out[ids] = np.round(self.counters[ids][:, None] + np.cumsum(inc, axis=1), 3)
        running = self._walk(self.running, k, 0.8, 0, 64, np.full(s.nodes, 18.0))
        self.running = running[:, -1]
        waiting = self._walk(self.waiting, k, 0.6, 0, 200, np.full(s.nodes, 4.0))
        self.waiting = waiting[:, -1]
        kv = self._walk(self.kv, k, 0.02, 0.05, 0.98, np.full(s.nodes, 0.55))
        self.kv = kv[:, -1]
        out[self.idx["running"]] = np.round(running)
        out[self.idx["waiting"]] = np.round(waiting)
        out[self.idx["kv"]] = np.round(kv, 3)
        for metric, (medians, sigma) in HISTOGRAMS.items():
            ids = self.idx[f"hist:{metric}"].reshape(s.nodes, len(BUCKETS))
            for node in range(s.nodes):
                median = medians[self.model_index[node]] * (1 + 0.3 * day)
                finite = np.asarray([b for b in BUCKETS if b != math.inf])
                cdf = _phi((np.log(finite[:, None]) - np.log(median[None, :])) / sigma)
                cdf = np.vstack([cdf, np.ones((1, k))])
                inc = cdf * reqs[node][None, :]
                out[ids[node]] = np.round(self.counters[ids[node]][:, None] + np.cumsum(inc, axis=1), 3)
        if s.per_gpu_tokens:
            per_gpu = np.vstack([gen[self.node_of_gpu[i]] / dt / s.gpus_per_node * (0.62 if self.slow[i] else 1.0)
                                 for i in range(len(gpus))])
            out[self.idx["gpu_tokens"]] = np.round(per_gpu, 1)
        if s.nccl:
            self._nccl(out, ts, end)
        if s.moe:  # routed tokens follow node 0's generated tokens, 2 experts per token
            shares = np.tile(np.ones(MOE_EXPERTS), (MOE_LAYERS, 1))
            shares[1, 0], shares[1, -1] = 3.0, 0.0
            shares = (shares / shares.sum(axis=1, keepdims=True) * 2).reshape(-1)
            ids = self.idx["moe"]
            out[ids] = np.round(self.counters[ids][:, None] + np.cumsum(gen[0])[None, :] * shares[:, None])
            for part, per_step in (("sum", 0.6), ("count", 1.0)):
                bal = self.idx[f"bal_{part}"]
                out[bal] = self.counters[bal][:, None] + per_step * np.arange(1, k + 1)[None, :]
        if s.software:
            out[self.idx["info"]] = 1.0
            upgraded = ts >= (f.start_ms + end) // 2  # the series that is not there carries staleness markers
            out[self.idx["info_until_upgrade"]] = np.where(upgraded, STALE_NAN, 1.0)
            out[self.idx["info_after_upgrade"]] = np.where(upgraded, 1.0, STALE_NAN)
        ctr = [*("energy", "ecc_cor", "req_success", "req_failure", "req_abort", "prompt", "generated", "http5xx")]
        ctr += [f"hist:{m}" for m in HISTOGRAMS] + (["timeouts", "warnings"] if s.nccl else [])
        ctr += ["moe", "bal_sum", "bal_count"] if s.moe else []
        for name in ctr:
            ids = self.idx[name]
            self.counters[ids] = out[ids, -1]
        return out

    def _nccl(self, out: F64, ts: I64, end: int) -> None:
        k = len(ts)
        ids = self.idx["busbw"]
        sizes = np.asarray([float(self.fleet.keys[i].get("size_bytes")) for i in ids])
        peak = np.asarray([180e9 if self.fleet.keys[i].get("op") == "AllReduce" else 150e9 for i in ids])
        bw = peak * sizes / (sizes + 24e6)
        out[ids] = np.round(bw[:, None] * (1 + self.rng.normal(0, 0.03, (len(ids), k))), -6)
        tids = self.idx["tests_busbw"]
        tsizes = np.asarray([float(self.fleet.keys[i].get("size_bytes")) for i in tids])
        tpeak = np.asarray([170e9 if self.fleet.keys[i].get("nodes") == "1" else 130e9 for i in tids])
        out[tids] = np.round((tpeak * tsizes / (tsizes + 20e6))[:, None] * np.ones((1, k)), -6)
        timeouts = self.idx["timeouts"]
        out[timeouts] = np.where(np.arange(len(timeouts))[:, None] == 0, (ts >= end - 8 * MINUTE_MS).astype(float), 0.0)
        # The event series exists from the first scrape that read the timeout on; its value is that time.
        grid = self.s.scrape_ms
        read_at = self.fleet.start_ms - (-(end - 8 * MINUTE_MS - self.fleet.start_ms) // grid) * grid
        out[self.idx["timeout_event"]] = np.where(ts >= read_at, read_at / 1000, np.nan)
        warnings = self.idx["warnings"]
        out[warnings] = self.counters[warnings][:, None] + np.cumsum(self.rng.random((len(warnings), k)) < 0.004, axis=1)


__all__ = ["FleetShape", "SyntheticFleet", "host_of", "model_of", "BUCKETS"]
