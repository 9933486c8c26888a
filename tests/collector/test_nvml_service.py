"""Local GPUs end to end: NVML (faked at the pynvml boundary) -> store -> queries and /metrics."""

from __future__ import annotations

import time

import httpx
import pytest

from infermeter.settings import GpuSettings, Settings, StoreSettings
from tests.collector.fake_pynvml import FakeNvml
from tests.service import serve


def _query(base: str, q: str) -> list[dict[str, object]]:
    result: list[dict[str, object]] = httpx.get(f"{base}/api/v1/query", params={"query": q}).json()["data"]["result"]
    return result


def _wait(base: str, q: str, seconds: float = 15) -> list[dict[str, object]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = _query(base, q)
        if found:
            return found
        time.sleep(0.2)
    return []


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_gpus_are_stored_and_served_under_dcgm_names(store_url: str) -> None:
    settings = Settings(store=StoreSettings(url=store_url), gpu=GpuSettings(interval="300ms"))
    with serve(settings, nvml_module=FakeNvml()) as (base, _runtime):
        power = _wait(base, 'gpu_power_watts{job="gpu"}')
        assert len(power) == 8
        assert {p["metric"]["gpu"] for p in power} == {str(i) for i in range(8)}  # type: ignore[index]
        assert all(float(p["value"][1]) > 0 for p in power)  # type: ignore[index]
        assert [r["value"][1] for r in _query(base, 'up{job="gpu"}')] == ["1"]
        metrics = httpx.get(f"{base}/metrics").text
        util = [line for line in metrics.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
        assert len(util) == 8
        assert 'device="nvidia0"' in metrics and "modelName=" in metrics and "Hostname=" in metrics
        assert "DCGM_FI_DEV_FB_USED{" in metrics and "DCGM_FI_DEV_POWER_USAGE{" in metrics


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_service_without_nvml_keeps_running_with_the_gpu_target_down(store_url: str) -> None:
    fake = FakeNvml()
    fake.init_error = fake.NVMLError_LibraryNotFound()
    settings = Settings(store=StoreSettings(url=store_url), gpu=GpuSettings(interval="300ms"))
    with serve(settings, nvml_module=fake) as (base, _runtime):
        up = _wait(base, 'up{job="gpu"}')
        assert [r["value"][1] for r in up] == ["0"]
        targets = httpx.get(f"{base}/api/v1/targets").json()["data"]["activeTargets"]
        gpu = next(t for t in targets if t["labels"]["job"] == "gpu")
        assert gpu["lastErrorReason"] == "nvml_unavailable"
        assert httpx.get(f"{base}/ready").status_code == 200
        assert "DCGM_FI_DEV_GPU_UTIL" not in httpx.get(f"{base}/metrics").text
