"""SIGTERM drains: requests in flight finish with their full output, new connections are refused,
and the process exits 0 (the real `python -m worker serve` in a subprocess)."""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.worker.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def _running(url: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=5).text.splitlines():
        if line.startswith("vllm:num_requests_running{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.slow
def test_sigterm_lets_in_flight_requests_finish(tmp_path: Path, model_dir: Path) -> None:
    port = free_port()
    config = tmp_path / "infermeter.yaml"
    config.write_text(f"worker:\n  model_dir: {model_dir}\n  port: {port}\n  precision: fp32\n  num_threads: 1\n")
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "worker", "--config", str(config), "serve", "--log-level", "warning"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "worker did not become healthy"
            time.sleep(0.1)
        body = {"prompt": "drain me", "max_tokens": 1500, "ignore_eos": True}
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(httpx.post, url + "/v1/generate", json=body, timeout=60) for _ in range(3)]
            while _running(url) < 3:
                assert not any(f.done() for f in futures), "finished before SIGTERM: make them longer"
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            with pytest.raises(httpx.ConnectError):
                httpx.get(url + "/health", timeout=2)
            results = [f.result() for f in futures]
        assert [r.status_code for r in results] == [200, 200, 200]
        assert all(r.json()["usage"]["completion_tokens"] == 1500 for r in results)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
