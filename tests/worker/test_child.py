"""The worker as a supervised child (``infermeter up``) and the baseline load against it."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.worker.conftest import ThreadWorker, free_port
from worker.child import BaselineLoad, WorkerChild
from worker.config import BaselineLoadConfig, WorkerConfig

ROOT = Path(__file__).resolve().parents[2]


def _wait(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_child_starts_restarts_after_a_crash_and_stops(model_dir: Path) -> None:
    config = WorkerConfig(port=free_port(), model_dir=str(model_dir), precision="fp32", num_threads=1, timeout_ms=5000)
    child = WorkerChild(config, backoff_initial_s=0.2, cwd=str(ROOT))
    child.start()
    try:
        assert child.wait_healthy(60), child.status
        first = child.status
        assert first.state == "healthy" and first.pid is not None and first.restarts == 0
        r = httpx.post(child.url + "/v1/generate", json={"prompt": "hi", "max_tokens": 3})
        assert r.status_code == 200
        os.kill(first.pid, signal.SIGKILL)
        assert _wait(lambda: child.status.restarts == 1, 10), child.status
        assert child.wait_healthy(60), child.status
        second = child.status
        assert second.pid not in (None, first.pid) and second.last_exit == -signal.SIGKILL
    finally:
        final = child.stop()
    assert final.state == "stopped" and final.pid is None and final.last_exit == 0  # drained, exit 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(child.url + "/health", timeout=1)


@pytest.mark.slow
def test_a_refused_config_fails_without_restarts(model_dir: Path) -> None:
    config = WorkerConfig(port=free_port(), model_dir=str(model_dir), model_path="ref-small", max_batch_size=4096,
                          max_context_length=1_048_576)
    child = WorkerChild(config, backoff_initial_s=0.1, cwd=str(ROOT))
    child.start()
    try:
        assert not child.wait_healthy(60)
        status = child.status
        assert status.state == "failed" and status.last_exit == 78 and status.restarts == 0
        assert status.error is not None and "does not fit" in status.error and "max_batch_size" in status.error
    finally:
        child.stop()


def test_baseline_load_runs_gently_until_stopped(worker: ThreadWorker) -> None:
    load = BaselineLoad(worker.url, BaselineLoadConfig(concurrency=2, think_time_ms=50, prompt_tokens=16,
                                                       output_tokens=4))

    async def scenario() -> None:
        load.start()
        deadline = time.monotonic() + 20
        while load.status.ok < 4:
            assert time.monotonic() < deadline, load.status
            await asyncio.sleep(0.05)
        assert load.status.state == "running"
        status = await load.stop()
        assert status.state == "stopped" and status.failed == 0 and status.ok >= 4

    asyncio.run(scenario())


def test_baseline_load_waits_for_a_worker_that_is_not_there() -> None:
    load = BaselineLoad(f"http://127.0.0.1:{free_port()}", BaselineLoadConfig())

    async def scenario() -> None:
        load.start()
        await asyncio.sleep(0.3)
        assert load.status.state == "waiting" and load.status.sent == 0
        assert (await load.stop(2)).state == "stopped"

    asyncio.run(scenario())


def test_disabled_baseline_does_nothing() -> None:
    load = BaselineLoad.for_worker(WorkerConfig(baseline=BaselineLoadConfig(enabled=False)))

    async def scenario() -> None:
        await load.start()
        assert load.status.state == "stopped" and load.status.sent == 0

    asyncio.run(scenario())


@pytest.mark.slow
def test_embedded_worker_serves_and_drives_baseline_load(model_dir: Path) -> None:
    """What `infermeter up` runs: the child plus the gentle load, started and stopped from a loop."""
    from worker.child import EmbeddedWorker

    config = WorkerConfig(port=free_port(), model_dir=str(model_dir), precision="fp32", num_threads=1,
                          baseline=BaselineLoadConfig(concurrency=1, think_time_ms=20, prompt_tokens=8, output_tokens=4))
    embedded = EmbeddedWorker(config, child=WorkerChild(config, cwd=str(ROOT)))

    async def scenario() -> None:
        await embedded.start()
        deadline = time.monotonic() + 60
        # The supervisor polls health on its own schedule: its state can trail the load's first answers.
        while embedded.status()["baseline"]["ok"] < 3 or embedded.status()["state"] != "healthy":  # type: ignore[index]
            assert time.monotonic() < deadline, embedded.status()
            await asyncio.sleep(0.1)
        metrics = httpx.get(config.url() + "/metrics").text
        assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="ref-tiny"}' in metrics
        await embedded.stop()
        assert embedded.status()["state"] == "stopped"

    asyncio.run(scenario())
