"""Real Prometheus-compatible engines as test peers, started on free loopback ports: the Debian
packages' VictoriaMetrics and Prometheus (its remote-write receiver on)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.service import free_port, wait_http

VM = "/usr/bin/victoria-metrics"
needs_vm = pytest.mark.skipif(not os.access(VM, os.X_OK), reason="the Debian package victoria-metrics is installed by make test")
needs_prometheus = pytest.mark.skipif(not shutil.which("prometheus"), reason="the Debian package prometheus is installed by make test")


class VictoriaMetrics:
    def __init__(self, storage: Path, port: int | None = None) -> None:
        self.storage, self.port = storage, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # latencyOffset 0: answer with samples as soon as they are written (the default hides
        # the newest 30 s, which would make every read-after-write check wait).
        self.proc = subprocess.Popen([VM, f"-storageDataPath={self.storage}", f"-httpListenAddr=127.0.0.1:{self.port}",
                                      "-retentionPeriod=100y", "-loggerLevel=ERROR", "-search.latencyOffset=0s",
                                      "-search.disableCache"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"{self.url}/health", 30)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None

    def flush(self) -> None:
        """Make everything received searchable now."""
        httpx.get(f"{self.url}/internal/force_flush", timeout=30)

    def export(self, selector: str) -> list[dict[str, object]]:
        self.flush()
        reply = httpx.post(f"{self.url}/api/v1/export", data={"match[]": selector}, timeout=60)
        return [json.loads(line) for line in reply.text.splitlines()]


class Prometheus:
    def __init__(self, tmp: Path, port: int | None = None) -> None:
        self.tmp, self.port = tmp, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        (self.tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
        self.proc = subprocess.Popen([shutil.which("prometheus") or "prometheus", f"--config.file={self.tmp / 'prometheus.yml'}",
                                      f"--storage.tsdb.path={self.tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}",
                                      "--web.enable-remote-write-receiver", "--log.level=warn"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"{self.url}/-/ready", 60)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None


def wait_until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
