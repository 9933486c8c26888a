"""The deploy configuration end to end, without Docker: the real service (NVML faked at the pynvml
boundary) and a real Prometheus (Debian's) running deploy/prometheus.yml with its targets
pointed at loopback; the dashboards' queries then answer with data through Prometheus.

What this proves beyond the static checks: the federation selector returns our canonical and
cost series, /metrics carries the DCGM names, the exported rules load, and the panels' label
matching (e.g. cost vs budget ``on(scope, model)``) finds both sides.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from infermeter.settings import GpuSettings, Settings, StoreSettings
from tests.collector.fake_pynvml import FakeNvml
from tests.deploy.test_grafana import _exprs, concrete
from tests.service import free_port, serve

REPO = Path(__file__).resolve().parents[2]


def _wait(what: str, check: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _push(base: str, step: int) -> None:
    now = int(time.time() * 1000)
    samples: list[dict[str, Any]] = []

    def put(metric: str, value: float, **labels: str) -> None:
        samples.append({"metric": metric, "labels": labels, "ts": now, "value": value})

    target = {"job": "vllm", "instance": "127.0.0.1:8080", "engine": "vllm", "model": "llama"}
    put("inference_generation_tokens_total", 1000.0 * step, **target)
    put("inference_prompt_tokens_total", 2000.0 * step, **target)
    put("inference_requests_total", 100.0 * step, outcome="success", **target)
    put("inference_requests_total", 1.0 * step, outcome="failure", **target)
    put("inference_requests_waiting", 3.0, **target)
    put("inference_requests_running", 8.0, **target)
    put("inference_kv_cache_usage_ratio", 0.4, **target)
    for name in ("inference_inter_token_latency_seconds", "inference_time_to_first_token_seconds",
                 "inference_e2e_request_latency_seconds"):
        for le, share in (("0.01", 0.5), ("0.05", 0.9), ("+Inf", 1.0)):
            put(f"{name}_bucket", 100.0 * step * share, le=le, **target)
        put(f"{name}_count", 100.0 * step, **target)
        put(f"{name}_sum", 2.0 * step, **target)
    put("gpu_generation_tokens_per_second", 50.0, host="n1", gpu="0", model="llama")
    for scope in ({"scope": "fleet"}, {"scope": "model", "model": "llama"}):
        put("infermeter_cost_dollars_per_hour", 12.0, **scope)
        put("infermeter_idle_cost_dollars_per_hour", 2.0, **scope)
        put("infermeter_cost_per_million_tokens_dollars", 23.0, **scope)
        put("infermeter_budget_cost_per_million_tokens_dollars", 20.0, **scope)
        put("infermeter_spend_period_dollars", 900.0, **scope)
        put("infermeter_budget_spend_period_dollars", 1000.0, **scope)
    reply = httpx.post(f"{base}/api/v1/samples", json={"samples": samples}, timeout=10)
    assert reply.status_code == 200, reply.text


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus (Debian package prometheus) is installed by the test setup"
    folder = tmp_path_factory.mktemp("stack")
    settings = Settings(store=StoreSettings(url=f"sqlite:///{folder / 'store.db'}"), gpu=GpuSettings(interval="300ms"))
    with serve(settings, nvml_module=FakeNvml()) as (base, _runtime):
        service = base.removeprefix("http://")
        config = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
        config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
        for job in config["scrape_configs"]:
            for static in job["static_configs"]:
                static["targets"] = [service if t == "infermeter:8000" else f"127.0.0.1:{free_port()}"
                                     for t in static["targets"]]  # the worker: a closed port, so up == 0
        config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{free_port()}"]
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        shutil.copytree(REPO / "deploy" / "prometheus", folder / "prometheus")
        port = free_port()
        process = subprocess.Popen(
            [binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        prom = f"http://127.0.0.1:{port}"
        try:
            def ready() -> bool:
                if process.poll() is not None:
                    raise AssertionError(f"prometheus exited: {process.stderr.read().decode() if process.stderr else ''}")
                try:
                    return httpx.get(f"{prom}/-/ready", timeout=1).status_code == 200
                except httpx.HTTPError:
                    return False

            _wait("prometheus", ready)
            _push(base, 1)
            _wait("federated series", lambda: bool(_query(prom, "inference_generation_tokens_total")))
            time.sleep(1.2)
            _push(base, 2)
            _wait("a rate", lambda: bool(_query(prom, "rate(inference_generation_tokens_total[5m])")))
            _wait("DCGM names", lambda: bool(_query(prom, "DCGM_FI_DEV_GPU_UTIL")))
            yield base, prom
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            if process.stderr is not None:
                process.stderr.close()


def _query(prom: str, expr: str) -> list[dict[str, Any]]:
    reply = httpx.post(f"{prom}/api/v1/query", data={"query": expr}, timeout=10)
    assert reply.status_code == 200, reply.text
    result: list[dict[str, Any]] = reply.json()["data"]["result"]
    return result


def test_dashboards_show_data_through_prometheus(stack: tuple[str, str]) -> None:
    _, prom = stack
    empty = []
    for name, title, expr in _exprs():
        if not _query(prom, concrete(expr)):
            empty.append(f"{name} / {title}: {expr}")
    # Series nobody writes in this test: forecast crossings, NCCL, firing alerts.
    allowed = ("infermeter_forecast_budget_crossing_hours", "nccl_", "ALERTS")
    unexpected = [e for e in empty if not any(a in e for a in allowed)]
    assert not unexpected, "\n".join(unexpected)


def test_key_panels_compute_the_right_values(stack: tuple[str, str]) -> None:
    _, prom = stack
    ratio = _query(prom, 'infermeter_cost_per_million_tokens_dollars{scope="fleet"} / '
                         'infermeter_budget_cost_per_million_tokens_dollars{scope="fleet"}')
    assert [float(r["value"][1]) for r in ratio] == [pytest.approx(23 / 20)]
    spend = _query(prom, "infermeter_spend_period_dollars / on(scope, model) infermeter_budget_spend_period_dollars")
    assert sorted(float(r["value"][1]) for r in spend) == [pytest.approx(0.9)] * 2
    fails = _query(prom, 'sum(rate(inference_requests_total{outcome="failure"}[5m])) / sum(rate(inference_requests_total[5m]))')
    assert float(fails[0]["value"][1]) == pytest.approx(1 / 101)
    gpus = _query(prom, "DCGM_FI_DEV_GPU_UTIL")
    assert len(gpus) == 8 and {"gpu", "UUID", "device", "modelName", "Hostname", "job", "instance"} <= set(gpus[0]["metric"])
    assert gpus[0]["metric"]["job"] == "infermeter"
    canonical = _query(prom, "gpu_utilization_ratio")
    assert len(canonical) == 8 and canonical[0]["metric"]["job"] == "gpu"  # federated with the original labels
    down = _query(prom, 'up{job="infermeter-worker"}')
    assert [r["value"][1] for r in down] == ["0"]
    rules = httpx.get(f"{prom}/api/v1/rules", timeout=10).json()["data"]["groups"]
    assert {g["name"] for g in rules} == {"infermeter-gpu", "infermeter-requests", "infermeter-cost", "infermeter-moe", "infermeter-moe-unused", "infermeter-drift"}
    broken = [(r["name"], r.get("lastError")) for g in rules for r in g["rules"] if r.get("health") == "err"]
    assert not broken, broken
