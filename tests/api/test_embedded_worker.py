"""A bare machine end to end: `up` starts the reference worker as a child, drives its gentle
baseline load, scrapes it as a vLLM server, and the canonical series appear in the store."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from infermeter.settings import GpuSettings, ScrapeSettings, Settings, StoreSettings
from store.series_index import Matcher, Selector
from tests.service import free_port, serve
from worker.config import WorkerConfig


@pytest.mark.slow
def test_up_runs_the_worker_and_collects_its_load(tmp_path: Path) -> None:
    worker = WorkerConfig.model_validate(
        {"port": free_port(), "model_dir": str(tmp_path / "models"), "num_threads": 1,
         "baseline": {"think_time_ms": 200, "output_tokens": 8}}
    )
    settings = Settings(
        store=StoreSettings(url=f"sqlite:///{tmp_path / 'store.db'}"),
        gpu=GpuSettings(nvml="off"),
        scrape=ScrapeSettings(interval="1s", timeout="1s"),
        worker=worker,
    )
    with serve(settings, embedded_worker=True) as (base, runtime):
        assert runtime.worker is not None
        deadline = time.monotonic() + 90
        found = []
        while time.monotonic() < deadline:
            selector = Selector("inference_generation_tokens_total", (Matcher("job", "=", "infermeter-worker"),))
            found = [v for _, _, v in runtime.reader.instant(selector, runtime.clock.now_ms()) if v > 0]
            if found and runtime.worker.status()["state"] == "healthy":  # the supervisor polls on its own
                break
            time.sleep(1)
        status = runtime.worker.status()
        assert found, f"no generated tokens scraped from the worker; worker status: {status}"
        assert status["state"] == "healthy", status
        targets = httpx.get(f"{base}/api/v1/targets").json()["data"]["activeTargets"]
        worker_target = [t for t in targets if t["labels"]["job"] == "infermeter-worker"]
        assert worker_target and worker_target[0]["health"] == "up"
        # the raw vLLM series are stored beside the canonical ones
        assert runtime.reader.select(Selector("vllm:generation_tokens_total"))
