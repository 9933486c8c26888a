"""HTTPS from `infermeter up` with a configured certificate, and rate limits per principal."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from access.principal import Role
from infermeter.settings import Settings
from store.clock import ManualClock
from tests.service import free_port, serve
from tests.tls_certs import self_signed

T0 = 1_764_000_000_000


def test_up_serves_https_with_the_configured_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    port = free_port()
    config = tmp_path / "infermeter.yaml"
    config.write_text(f"server:\n  port: {port}\n  tls_cert_file: {cert}\n  tls_key_file: {key}\n"
                      f"store:\n  url: sqlite:///{tmp_path / 'tls.db'}\ngpu:\n  nvml: 'off'\nworker:\n  embedded: false\n")
    proc = subprocess.Popen([sys.executable, "-m", "infermeter", "--config", str(config), "up"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    trusted = ssl.create_default_context(cafile=str(cert))
    try:
        for _ in range(300):
            try:
                if httpx.get(f"https://127.0.0.1:{port}/health", verify=trusted, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    raise AssertionError(proc.stdout.read() if proc.stdout else "") from None
                time.sleep(0.2)
        assert httpx.get(f"https://127.0.0.1:{port}/api/v1/status/buildinfo", verify=trusted).status_code == 200
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
            plain = True
        except httpx.HTTPError:
            plain = False
        assert not plain, "plain HTTP must not be answered on the TLS port"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert f"listening on https://127.0.0.1:{port}" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"server:\n  tls_cert_file: {cert}\nstore:\n  url: sqlite:///{tmp_path / 'b.db'}\n")
    refused = subprocess.run([sys.executable, "-m", "infermeter", "--config", str(bad), "check-config"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "tls_cert_file and tls_key_file go together" in refused.stderr


def test_rate_limits_hold_per_principal_and_leave_probes_alone(tmp_path: Path) -> None:
    settings = Settings.model_validate({
        "server": {"api_token": "admin-secret"}, "store": {"url": f"sqlite:///{tmp_path / 'r.db'}"},
        "gpu": {"nvml": "off"}, "security": {"rate_limits": {"query": "5/minute", "write": "3/minute"}},
    })
    with serve(settings, ManualClock(T0)) as (base, runtime):
        _, other = runtime.access.tokens.create("other", Role.VIEWER, "test")
        admin = {"authorization": "Bearer admin-secret"}
        answers = [httpx.get(f"{base}/api/v1/query", params={"query": "1"}, headers=admin) for _ in range(6)]
        assert [a.status_code for a in answers] == [200] * 5 + [429]
        limited = answers[-1]
        assert limited.json()["errorType"] == "too_many_requests" and "api_token" in limited.json()["error"]
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert httpx.get(f"{base}/api/v1/query", params={"query": "1"},
                         headers={"authorization": f"Bearer {other}"}).status_code == 200  # its own budget
        assert all(httpx.get(f"{base}/health").status_code == 200 for _ in range(20))  # probes are never limited
        assert httpx.get(f"{base}/api/v1/rules", headers=admin).status_code == 200  # cheap reads are not "query"
        body = json.dumps({"samples": [{"metric": "m", "ts": T0, "value": 1}]})
        pushes = [httpx.post(f"{base}/api/v1/samples", content=body, headers=admin).status_code for _ in range(4)]
        assert pushes == [200, 200, 200, 429]
        anonymous = [httpx.get(f"{base}/api/v1/series", params={"match[]": "m"}).status_code for _ in range(6)]
        assert anonymous[-1] == 429  # anonymous callers are limited per address
