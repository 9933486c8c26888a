"""Scraping real loopback targets through the running service: a bad target never hurts the rest."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import httpx
import pytest

from infermeter.config_file import load_settings
from tests.collector.targets import serve_targets
from tests.service import free_port, serve

INTERVAL = 0.5


def _config(path: Path, base: str, store_url: str, jobs: dict[str, str], extra: str = "") -> None:
    lines = [
        f"store:\n  url: {store_url}\ngpu:\n  nvml: 'off'\n",
        f"scrape:\n  interval: {int(INTERVAL * 1000)}ms\n  timeout: 300ms\n  body_limit: 10000000\n  targets:\n",
    ]
    for job, route in jobs.items():
        lines.append(f"    - job: {job}\n      urls: [{base}{route}]\n")
    path.write_text("".join(lines) + extra)


def _targets(base: str) -> dict[str, dict[str, object]]:
    data = httpx.get(f"{base}/api/v1/targets").json()["data"]["activeTargets"]
    return {t["labels"]["job"]: t for t in data}


def _instant(base: str, query: str) -> list[dict[str, object]]:
    result: list[dict[str, object]] = httpx.get(f"{base}/api/v1/query", params={"query": query}).json()["data"]["result"]
    return result


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_bad_targets_fail_alone_and_the_healthy_cadence_holds(store_url: str, tmp_path: Path) -> None:
    config = tmp_path / "infermeter.yaml"
    jobs = {"healthy": "/healthy", "hung": "/hang", "drip": "/drip", "huge": "/huge", "malformed": "/malformed", "flaky": "/flaky"}
    gone_port = free_port()  # nothing listens here until the test starts a server on it
    gone = f"    - job: gone\n      urls: [http://127.0.0.1:{gone_port}/healthy]\n"
    with serve_targets() as (targets_base, state):
        _config(config, targets_base, store_url, jobs, gone)
        settings, _ = load_settings(str(config))
        with serve(settings, config_path=str(config)) as (base, _runtime):
            time.sleep(6 * INTERVAL)
            status = _targets(base)
            assert status["healthy"]["health"] == "up"
            assert status["hung"]["health"] == "down" and status["hung"]["lastErrorReason"] == "timeout"
            assert status["drip"]["lastErrorReason"] == "timeout"
            assert status["huge"]["lastErrorReason"] == "too_large"
            assert status["malformed"]["lastErrorReason"] == "parse"
            assert "line 2" in str(status["malformed"]["lastError"]) and "not-a-number" in str(status["malformed"]["lastError"])

            # A target that is not there at all: connection refused, up=0; then it appears.
            assert _targets(base)["gone"]["lastErrorReason"] == "connect"
            with serve_targets(gone_port):
                time.sleep(3 * INTERVAL)
                assert _targets(base)["gone"]["health"] == "up"

            # The flaky target goes away: up=0, its series go stale; then it comes back.
            assert _instant(base, 'flaky_value{job="flaky"}')
            state.flaky_up = False
            time.sleep(3 * INTERVAL)
            assert _targets(base)["flaky"]["lastErrorReason"] == "http_status"
            assert _instant(base, 'flaky_value{job="flaky"}') == []
            assert [r["value"][1] for r in _instant(base, 'up{job="flaky"}')] == ["0"]
            state.flaky_up = True
            time.sleep(3 * INTERVAL)
            assert _targets(base)["flaky"]["health"] == "up"
            assert _instant(base, 'flaky_value{job="flaky"}')

            running = _instant(base, 'vllm:num_requests_running{job="healthy"}')
            assert running and running[0]["metric"]["instance"].startswith("127.0.0.1:")
            # the engine is detected and its series mapped onto the canonical set, beside the raw ones
            canonical = _instant(base, 'inference_requests_running{job="healthy"}')
            assert [(c["metric"]["engine"], c["metric"]["model"], c["value"][1]) for c in canonical] == [("vllm", "m", "3")]  # type: ignore[index]
            assert _instant(base, 'inference_generation_tokens_total{job="healthy",engine="vllm"}')
            hits = state.healthy_hits[1:]
            gaps = [b - a for a, b in zip(hits, hits[1:])]
            assert len(gaps) >= 10
            # Cadence of the healthy target does not slip by more than 10 %: neither the typical
            # interval nor the average over the whole run (ticks stay on their grid, so one late
            # scrape on this shared 2-core machine does not push the following ones).
            assert abs(statistics.median(gaps) - INTERVAL) <= 0.1 * INTERVAL, gaps
            assert abs((hits[-1] - hits[0]) / (len(hits) - 1) - INTERVAL) <= 0.1 * INTERVAL, gaps
            assert sum(g > 1.5 * INTERVAL for g in gaps) <= max(1, len(gaps) // 10), gaps

            own = httpx.get(f"{base}/metrics").text
            assert 'job="hung",reason="timeout"' in own
            assert 'job="huge",reason="too_large"' in own
            healthy_up = [line for line in own.splitlines() if line.startswith("infermeter_target_up") and 'job="healthy"' in line]
            assert healthy_up and healthy_up[0].endswith(" 1.0")

            # Reload: a broken file changes nothing; a good one swaps the targets.
            config.write_text(config.read_text() + "    - job: 5\n      urls: [not-a-url]\n")
            reply = httpx.post(f"{base}/-/reload")
            assert reply.status_code == 400
            assert any("urls" in p for p in reply.json()["problems"])
            assert set(_targets(base)) == set(jobs) | {"gone"}
            _config(config, targets_base, store_url, {"healthy": "/healthy"})
            reply = httpx.post(f"{base}/-/reload")
            assert reply.status_code == 200 and reply.json()["targets"] == 1
            assert set(_targets(base)) == {"healthy"}
