"""VictoriaMetrics as a benchmark peer: a single-node server on a loopback port with its own
storage directory, loaded through ``/api/v1/import``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from benchmarks._common import Fleet, free_port

# -- VictoriaMetrics ----------------------------------------------------------------------------
VM_BINARY = "/usr/bin/victoria-metrics"


class VictoriaMetrics:
    """A single-node VictoriaMetrics on a loopback port with its own storage directory."""

    def __init__(self, storage: Path, binary: str = VM_BINARY) -> None:
        self.storage = storage
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(storage.parent / f"{storage.name}.log", "wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"-storageDataPath={storage}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                "-loggerLevel=ERROR",
                "-search.latencyOffset=0s",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, timeout=600.0)
        self._wait_ready()

    @staticmethod
    def available(binary: str = VM_BINARY) -> bool:
        return os.access(binary, os.X_OK)

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"victoria-metrics exited with {self.proc.returncode}")
            try:
                if self.http.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("victoria-metrics did not become healthy")

    def import_fleet(self, fleet: Fleet, series_per_request: int = 50) -> None:
        """``/api/v1/import`` JSON lines: one line per series with all its samples."""
        ts = fleet.ts_ms.tolist()
        for lo in range(0, fleet.n_series, series_per_request):
            lines = []
            for i in range(lo, min(lo + series_per_request, fleet.n_series)):
                key = fleet.keys[i]
                metric = {"__name__": key.name, **key.labels_dict()}
                lines.append(
                    json.dumps({"metric": metric, "values": fleet.values[i].tolist(), "timestamps": ts})
                )
            response = self.http.post("/api/v1/import", content="\n".join(lines).encode())
            response.raise_for_status()

    def flush_and_merge(self, timeout_s: float = 300.0) -> None:
        """Make imported data searchable and fully merged (force_merge runs in the background:
        wait until VictoriaMetrics reports no active forced merges)."""
        self.http.get("/internal/force_flush").raise_for_status()
        self.http.get("/internal/force_merge").raise_for_status()
        deadline = time.monotonic() + timeout_s
        time.sleep(0.5)
        while time.monotonic() < deadline:
            if self.metric("vm_active_force_merges") == 0:
                break
            time.sleep(0.25)
        self.http.get("/internal/force_flush").raise_for_status()

    def metric(self, name: str) -> float:
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return float("nan")

    def query_range(self, query: str, start_ms: int, end_ms: int, step_ms: int) -> httpx.Response:
        response = self.http.get(
            "/api/v1/query_range",
            params={
                "query": query,
                "start": f"{start_ms / 1000:.3f}",
                "end": f"{end_ms / 1000:.3f}",
                "step": f"{step_ms // 1000}s",
                "nocache": "1",
            },
        )
        response.raise_for_status()
        return response

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> VictoriaMetrics:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
