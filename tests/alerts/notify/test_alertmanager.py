"""A real Alertmanager (Debian's prometheus-alertmanager) on loopback receives pushed alerts."""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from alerts.notify.service import Notifier
from store import SystemClock
from tests.alerts.notify.conftest import alert, config, free_port, wait_until

BINARY = "/usr/bin/prometheus-alertmanager"

AM_CONFIG = """\
route:
  receiver: blackhole
  group_wait: 1h
receivers:
  - name: blackhole
"""


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("prometheus-alertmanager") or BINARY
    if not Path(binary).exists():
        pytest.fail(f"{BINARY} is missing: apt-get install -y prometheus-alertmanager")
    (tmp_path / "am.yml").write_text(AM_CONFIG)
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'am.yml'}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # no gossip port, no peers
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"alertmanager exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            return httpx.get(f"{base}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, 20, "alertmanager ready")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _active(base: str) -> dict[str, dict[str, Any]]:
    reply = httpx.get(f"{base}/api/v2/alerts", params={"active": "true"}, timeout=5)
    reply.raise_for_status()
    return {a["labels"]["instance"]: a for a in reply.json()}


def test_pushed_alerts_reach_a_real_alertmanager(alertmanager: str, engine: Engine) -> None:
    clock = SystemClock()
    cfg = config(
        route={"group_by": ["alertname"], "group_wait": "100ms", "group_interval": "500ms"},
        receivers=[{"name": "hook", "alertmanager_configs": [{"url": alertmanager, "timeout": "5s"}]}],
        retry={"initial_backoff": "50ms", "max_backoff": "500ms"},
        delivery={"poll_interval": "50ms"},
    )
    notifier = Notifier(cfg, engine, clock, CollectorRegistry(), random.Random(3))
    notifier.start()
    try:
        t0 = clock.now_ms()
        firing = [alert("GpuXidError", instance=i, starts=t0, job="dcgm") for i in ("n1", "n2")]
        notifier.submit(firing)
        wait_until(lambda: set(_active(alertmanager)) == {"n1", "n2"}, 10, "alerts in Alertmanager")
        got = _active(alertmanager)["n1"]
        assert got["labels"] == {"alertname": "GpuXidError", "severity": "warning", "instance": "n1", "job": "dcgm"}
        assert got["annotations"] == {"summary": "GpuXidError on n1"}
        assert got["generatorURL"] == "http://infermeter.test/rules"
        assert got["status"]["state"] == "active"

        # n1 resolves; n2 keeps firing past the 1.5 s validity of one push (so it was re-pushed).
        notifier.submit([alert("GpuXidError", "resolved", starts=t0, ends=clock.now_ms(), instance="n1", job="dcgm"),
                         firing[1]])
        wait_until(lambda: set(_active(alertmanager)) == {"n2"}, 10, "n1 resolved in Alertmanager")
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            notifier.submit([firing[1]])  # the rules engine's evaluations
            assert set(_active(alertmanager)) == {"n2"}
            time.sleep(0.25)
        sent = [r for r in notifier.outbox.rows() if r.kind == "alertmanager"]
        assert len(sent) >= 4 and {r.state for r in sent} <= {"sent", "pending"}
    finally:
        notifier.stop(5)
