"""`infermeter agent` as its own process, shipping to a real VictoriaMetrics (Debian package)
and to a real Prometheus 2.42 remote-write receiver: every sample the agent scraped is
queryable there with its labels; with VictoriaMetrics down, the agent killed -9 during the
outage and both back, nothing the agent had queued is lost and delivery resumes in order.

The scraped target serves a counter that goes up by one at every scrape, and remembers when it
served each value: the values the receiver holds are checked against the values served."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Response

from tests.engines import Prometheus, VictoriaMetrics, needs_prometheus, needs_vm
from tests.service import free_port, health_app, run_app, wait_http


class Sequence:
    def __init__(self) -> None:
        self.served: list[tuple[float, int]] = []  # (monotonic time, value)
        self._lock = threading.Lock()

    def app(self) -> FastAPI:
        app = health_app()

        @app.get("/metrics")
        async def metrics() -> Response:
            with self._lock:
                value = len(self.served) + 1
                self.served.append((time.monotonic(), value))
            body = f'# TYPE seq_total counter\nseq_total{{source="test"}} {value}\n'
            return Response(body, media_type="text/plain; version=0.0.4")

        return app


OUTAGE_S = 120.0


def _values(vm: VictoriaMetrics) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for row in vm.export("seq_total"):
        for v in row["values"]:  # type: ignore[attr-defined]
            out[int(v)] = row["metric"]  # type: ignore[assignment]
    return out


def _agent(config: Path, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERMETER_")}
    proc = subprocess.Popen([sys.executable, "-m", "infermeter", "--config", str(config), "agent", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=config.parent)
    wait_http(f"http://127.0.0.1:{port}/health", 60, proc)
    return proc


def _config(tmp: Path, target: str, receiver: str) -> Path:
    config = tmp / "agent.yaml"
    config.write_text(
        f"scrape:\n  targets:\n    - job: seq\n      urls: [{target}/metrics]\n      interval: 500ms\n      timeout: 400ms\n"
        f"gpu:\n  nvml: 'off'\nworker:\n  embedded: false\n"
        f"agent:\n  remote_write:\n    - url: {receiver}\n  queue_dir: {tmp / 'queue'}\n"
        f"  external_labels: {{cluster: test-cluster}}\n"
    )
    return config


def _queued(agent_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{agent_port}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("infermeter_agent_queue_samples{"))


@pytest.fixture
def sequence() -> Iterator[tuple[Sequence, str]]:
    seq = Sequence()
    with run_app(seq.app()) as base:
        yield seq, base


@needs_vm
def test_agent_to_victoriametrics_survives_an_outage_and_a_kill(tmp_path: Path, sequence: tuple[Sequence, str]) -> None:
    seq, target = sequence
    vm = VictoriaMetrics(tmp_path / "vm", free_port())
    vm.start()
    config = _config(tmp_path, target, f"{vm.url}/api/v1/write")
    port = free_port()
    agent = _agent(config, port)
    try:
        time.sleep(4)
        got = _values(vm)
        served_before = [v for t, v in seq.served if t < time.monotonic() - 2]
        assert served_before and set(served_before) <= set(got), (served_before, sorted(got))
        labels = next(iter(got.values()))
        assert labels["cluster"] == "test-cluster" and labels["node"] == socket.gethostname()
        assert labels["job"] == "seq" and labels["source"] == "test" and labels["instance"].startswith("127.0.0.1:")

        vm.stop()  # the receiver goes away for two minutes; the agent keeps scraping into its queue
        time.sleep(OUTAGE_S / 2)
        assert _queued(port) > 0
        killed_at = time.monotonic()
        agent.send_signal(signal.SIGKILL)  # half way through the outage
        agent.wait(10)
        agent = _agent(config, port)  # the same queue folder: what was queued is still there
        time.sleep(OUTAGE_S / 2)
        vm.start()
        # Drained: what is left is what the scrapes since the last flush added (a scrape every
        # 500 ms, a flush every second: up to two scrapes, 4 samples each, wait for the next one);
        # the outage's backlog was ~240 scrapes. The backoff may be at its 30 s cap.
        deadline = time.monotonic() + 90
        while _queued(port) > 8 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _queued(port) <= 8
        time.sleep(1)
        got = _values(vm)
        stop_at = time.monotonic() - 1.5
        served = [v for t, v in seq.served if t < stop_at]
        # a scrape answered in the instant before the kill may not have reached the disk yet
        missing = [v for t, v in seq.served if t < stop_at and v not in got]
        assert all(abs(t - killed_at) < 1.0 for t, v in seq.served if v in missing), missing
        assert len(missing) <= 1 and len(got) >= len(served) - 1
    finally:
        agent.kill()
        agent.wait(10)
        vm.stop()


@needs_prometheus
def test_agent_to_prometheus_remote_write_receiver(tmp_path: Path, sequence: tuple[Sequence, str]) -> None:
    seq, target = sequence
    prom = Prometheus(tmp_path / "prom")
    prom.start()
    prom_port = prom.port
    port = free_port()
    try:
        agent = _agent(_config(tmp_path, target, f"http://127.0.0.1:{prom_port}/api/v1/write"), port)
        try:
            time.sleep(4)
            served = [v for t, v in seq.served if t < time.monotonic() - 1.5]
            reply = httpx.get(f"http://127.0.0.1:{prom_port}/api/v1/query",
                              params={"query": 'seq_total{job="seq", cluster="test-cluster"}[1m]'}, timeout=10).json()
            values = {int(float(v)) for r in reply["data"]["result"] for _, v in r["values"]}
            assert served and set(served) <= values
        finally:
            agent.kill()
            agent.wait(10)
    finally:
        prom.stop()


def test_the_agent_loads_httpx_without_its_command_line_client() -> None:
    """``skip_httpx_cli`` (run by ``infermeter agent`` before anything imports httpx) keeps
    click, rich and pygments out of the process, and httpx still works."""
    code = (
        "import sys\n"
        "from infermeter.lean import skip_httpx_cli\n"
        "skip_httpx_cli()\n"
        "import httpx\n"
        "assert httpx.Request('GET', 'http://127.0.0.1/').url.host == '127.0.0.1'\n"
        "print(sorted(m for m in ('rich', 'pygments', 'click') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
