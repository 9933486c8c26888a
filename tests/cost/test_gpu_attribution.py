"""Per-GPU throughput and cost follow the GPUs each engine runs on: four replicas on four GPUs
of one node, one of them slow, through a real store; the attribution from the config (scrape
loop) and from NVML's processes (GPU source, real process table)."""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
import sys
import time
from collections.abc import Collection

import pytest

from collector.nvml.attribution import EngineTarget, PsutilProcessTable
from collector.nvml.source import NvmlGpuSource
from collector.scrape_loop import ScrapeLoop, TargetSpec
from collector.target_gpus import TARGET_GPU_INFO
from cost.compute import CostCalculator
from cost.ledger import CostLedger
from infermeter.settings import Settings
from infermeter.targets import target_specs
from store import ManualClock
from store.reader import Reader
from store.types import SeriesKey
from tests.alerts.rule_harness import first_firing
from tests.collector.fake_pynvml import FakeNvml
from tests.collector.test_scrape_loop import ScriptedSource, good
from tests.conftest import T0, StoreFactory
from tests.cost.test_cost_model import _book, _fill, _gpu, _tokens

RATES = [40.0, 38.0, 36.0, 5.0]  # tokens/s of the four replicas; the last one is slow
UTIL = [0.82, 0.78, 0.35, 0.02]


def _info(job: str, instance: str, gpu: str) -> tuple[SeriesKey, float, float]:
    key = SeriesKey.of(TARGET_GPU_INFO, target_job=job, target_instance=instance, gpu=gpu, source="config",
                       job=job, instance=instance)
    return (key, 1.0, 0.0)


def _fleet(attributed: bool, models: list[str] | None = None) -> list[tuple[SeriesKey, float, float]]:
    series = []
    for i, (rate, util) in enumerate(zip(RATES, UTIL)):
        series += _gpu("node-a", str(i), util, 300.0)
        series += _tokens((models or ["llama"] * 4)[i], f"node-a:800{i}", rate)
        if attributed:
            series.append(_info("vllm", f"node-a:800{i}", str(i)))
    return series


def _per_gpu_rates(make_store: StoreFactory, clock: ManualClock, attributed: bool) -> dict[str, float]:
    store = make_store()
    end = T0 + 20 * 60_000
    _fill(store, clock, _fleet(attributed), end)
    ledger = CostLedger(store.engine, CostCalculator(Reader(store), _book(), "here"), _book(), clock)
    minute = end - end % 60_000
    samples = [s for s in ledger.live_series(minute) if s.series.name == "gpu_generation_tokens_per_second"]
    return {s.series.get("gpu"): s.value for s in samples}


def test_four_replicas_one_slow(make_store: StoreFactory, clock: ManualClock) -> None:
    rates = _per_gpu_rates(make_store, clock, attributed=True)
    assert rates == pytest.approx({str(i): r for i, r in enumerate(RATES)}, rel=0.02)
    # the slow replica's GPU is the one GpuThroughputLow reports, and only it
    series = {SeriesKey.of("gpu_generation_tokens_per_second", host="node-a", gpu=g, model="llama"): (lambda t, v=v: v)
              for g, v in rates.items()}
    from alerts.defaults import default_rule_groups

    at, engine = first_firing(default_rule_groups(), "GpuThroughputLow", series, 12)
    assert at is not None
    assert [i.labels["gpu"] for r, i in engine.active() if r.name == "GpuThroughputLow"] == ["3"]


def test_without_attribution_the_node_average_hides_the_slow_gpu(make_store: StoreFactory, clock: ManualClock) -> None:
    rates = _per_gpu_rates(make_store, clock, attributed=False)
    assert set(rates) == {"0", "1", "2", "3"}
    assert max(rates.values()) == pytest.approx(min(rates.values()))
    assert rates["3"] == pytest.approx(sum(RATES) / 4, rel=0.02)


def test_gpu_cost_goes_to_the_model_of_its_engine(make_store: StoreFactory, clock: ManualClock) -> None:
    """Two models on one node: by token share the node's cost would be split 78:22 on every GPU;
    attributed, each GPU's cost belongs to its own engine's model."""
    store = make_store()
    end = T0 + 60 * 60_000
    _fill(store, clock, _fleet(True, ["big", "big", "small", "small"]), end)
    calc = CostCalculator(Reader(store), _book(), "here")
    rows, _ = calc.window(T0, end)
    by_gpu_model: dict[tuple[str, str], float] = {}
    for r in rows:
        if r.component in ("gpu", "idle"):
            by_gpu_model[(r.gpu, r.model)] = by_gpu_model.get((r.gpu, r.model), 0.0) + r.dollars
    assert {g for g, m in by_gpu_model if m == "big"} == {"0", "1"}
    assert {g for g, m in by_gpu_model if m == "small"} == {"2", "3"}
    assert by_gpu_model[("0", "big")] == pytest.approx(5.0, rel=0.01)  # 30 min at $4/h, 30 min at $6/h


def test_cpu_node_priced_per_node_hour(make_store: StoreFactory, clock: ManualClock) -> None:
    """The embedded worker on a machine without GPUs: its node-hours at the CPU price."""
    from cost.prices import CostSettings, PriceBook

    store = make_store()
    end = T0 + 60 * 60_000
    key = SeriesKey.of(TARGET_GPU_INFO, target_job="infermeter-worker", target_instance="127.0.0.1:8080", gpu="cpu",
                       source="config", job="infermeter-worker", instance="127.0.0.1:8080")
    tokens = [(SeriesKey(k.name, tuple((n, "infermeter-worker" if n == "job" else v) for n, v in k.labels)), g, r)
              for k, g, r in _tokens("ref-tiny", "127.0.0.1:8080", 2.0)]
    _fill(store, clock, [*tokens, (key, 1.0, 0.0)], end)
    book = PriceBook(CostSettings())
    rows, _ = CostCalculator(Reader(store), book, "laptop").window(T0, end)
    compute = [r for r in rows if r.gpu == "cpu"]
    assert {(r.node, r.gpu_model, r.model, r.component) for r in compute} == {("laptop", "CPU", "ref-tiny", "gpu")}
    assert sum(r.dollars for r in compute) == pytest.approx(CostSettings().cpu_dollars_per_node_hour, rel=0.01)


def test_embedded_worker_target_marks_cpu_only_without_a_gpu() -> None:
    settings = Settings()
    cpu = [s for s in target_specs(settings, "h", gpu_present=False) if s.job == "infermeter-worker"]
    gpu = [s for s in target_specs(settings, "h", gpu_present=True) if s.job == "infermeter-worker"]
    assert cpu[0].gpus == ("cpu",) and gpu[0].gpus == ()


def test_configured_gpus_ride_along_every_scrape() -> None:
    spec = TargetSpec(job="vllm", url="http://w1:8001/metrics", instance="w1:8001", gpus=("0", "GPU-abc"))
    stored = []

    async def append(batch: object) -> None:
        stored.append(batch)

    loop = ScrapeLoop(spec, ScriptedSource([good((SeriesKey.of("x"), 1.0))] * 2), append, ManualClock(5_000),
                      random.Random(1))

    async def main() -> None:
        await loop.scrape_once()
        await loop.scrape_once()

    asyncio.run(main())
    for batch in stored:
        info = {s.series.get("gpu"): (s.series.get("target_instance"), s.series.get("job"), s.value)
                for s in batch.samples() if s.series.name == TARGET_GPU_INFO}
        assert info == {"0": ("w1:8001", "vllm", 1.0), "GPU-abc": ("w1:8001", "vllm", 1.0)}


def test_config_gpus_must_name_a_url_of_the_job() -> None:
    from pydantic import ValidationError

    job = {"job": "vllm", "urls": ["http://w1:8001/metrics"]}
    settings = Settings.model_validate({"scrape": {"targets": [{**job, "gpus": {"w1:8001": ["0", "1"]}}]}})
    assert [s.gpus for s in target_specs(settings, "h") if s.job == "vllm"] == [("0", "1")]
    with pytest.raises(ValidationError, match="neither one of this job's urls"):
        Settings.model_validate({"scrape": {"targets": [{**job, "gpus": {"w2:8001": ["0"]}}]}})


class _Table:
    def __init__(self, trees: dict[int, frozenset[int]]) -> None:
        self.trees = trees

    def listener_trees(self, ports: Collection[int]) -> dict[int, frozenset[int]]:
        return {port: self.trees.get(port, frozenset()) for port in ports}


def test_nvml_processes_place_each_engine_on_its_gpus() -> None:
    nvml = FakeNvml(gpu_count=4)
    nvml.processes = {0: [101], 1: [102], 2: [201], 3: []}  # tensor parallel 2, then one replica, one idle GPU
    table = _Table({8001: frozenset({100, 101, 102}), 8002: frozenset({200, 201})})
    targets = [EngineTarget("vllm", "127.0.0.1:8001", 8001), EngineTarget("vllm", "127.0.0.1:8002", 8002)]
    source = NvmlGpuSource(ManualClock(T0), "node-a", nvml=nvml, engine_targets=targets, processes=table)

    async def collect() -> list[tuple[str, str, str]]:
        result = await source.collect(asyncio.get_running_loop().time() + 5)
        return sorted((s.series.get("target_instance"), s.series.get("gpu"), s.series.get("uuid"))
                      for s in result.batch.samples() if s.series.name == TARGET_GPU_INFO)

    found = asyncio.run(collect())
    assert [(inst, gpu) for inst, gpu, _ in found] == [("127.0.0.1:8001", "0"), ("127.0.0.1:8001", "1"),
                                                       ("127.0.0.1:8002", "2")]
    assert all(uuid for _, _, uuid in found)


def test_real_process_table_finds_the_listener_and_its_children() -> None:
    """A real engine-like process: a server that listens and starts a worker child."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "import socket, subprocess, sys, time\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {port})); s.listen()\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True); time.sleep(60)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        child = int(server.stdout.readline())
        deadline = time.monotonic() + 10
        tree: frozenset[int] = frozenset()
        while time.monotonic() < deadline and server.pid not in tree:
            tree = PsutilProcessTable().listener_trees([port])[port]
            time.sleep(0.1)
        assert {server.pid, child} <= tree
        trees = PsutilProcessTable().listener_trees([port, 1])
        assert trees[port] == tree and trees[1] == frozenset()
    finally:
        import psutil

        for proc in psutil.Process(server.pid).children(recursive=True):
            proc.kill()
        server.kill()
        server.wait()
