"""A bare machine end to end: `up` starts the reference worker as a child, drives its gentle
baseline load, scrapes it as a vLLM server, and the canonical series appear in the store; its
log at the default level has no per-request line of the baseline load (httpx logs one per
request at INFO)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infermeter.cli import REQUEST_LOGGERS, configure_logging
from infermeter.settings import GpuSettings, ScrapeSettings, Settings, StoreSettings
from store.series_index import Matcher, Selector
from tests.service import free_port, serve
from worker.config import WorkerConfig

REQUEST_LINE = "HTTP Request:"  # httpx's INFO line for every request it sends


@pytest.fixture
def service_logging() -> Iterator[None]:
    """What `infermeter up` sets up at its default level (INFO); the loggers put back after."""
    configure_logging("INFO")  # under pytest the root already has handlers: only the levels change
    try:
        yield
    finally:
        for name in REQUEST_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_request_loggers_are_quiet_below_debug_only(service_logging: None) -> None:
    assert all(logging.getLogger(n).getEffectiveLevel() == logging.WARNING for n in REQUEST_LOGGERS)
    configure_logging("DEBUG")
    assert all(logging.getLogger(n).level == logging.NOTSET for n in REQUEST_LOGGERS)


@pytest.mark.slow
def test_up_runs_the_worker_and_collects_its_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, service_logging: None
) -> None:
    caplog.set_level(logging.INFO)  # the root at the service's default level
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
            status = runtime.worker.status()
            answered = status["baseline"]["ok"]  # type: ignore[index]
            # the supervisor polls on its own; a few answered requests of the baseline load
            if found and status["state"] == "healthy" and isinstance(answered, int) and answered >= 3:
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
    baseline = status["baseline"]
    assert isinstance(baseline, dict) and baseline["ok"] >= 3, baseline
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if REQUEST_LINE in m], "per-request httpx lines in the service's log"
    assert [r for r in caplog.records if r.levelno == logging.INFO], "INFO lines of the service itself still arrive"
