"""NCCL logs configured in the service become stored series with their own `up`, end to end."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from infermeter.config_file import load_settings
from tests.collector.nccl_fixtures import DEBUG_LOG, WATCHDOG_LOG
from tests.service import serve


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_nccl_logs_are_collected_by_the_service(store_url: str, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text(DEBUG_LOG + WATCHDOG_LOG)
    config = tmp_path / "infermeter.yaml"
    config.write_text(
        f"store:\n  url: {store_url}\ngpu:\n  nvml: 'off'\n"
        f"nccl:\n  paths: ['{logs}/*.log']\n  state_file: {tmp_path / 'nccl.json'}\n  interval: 300ms\n"
    )
    settings, _ = load_settings(str(config))
    with serve(settings, config_path=str(config)) as (base, _runtime):
        deadline = time.monotonic() + 15
        timeouts: list[dict[str, object]] = []
        while time.monotonic() < deadline and not timeouts:
            time.sleep(0.3)
            reply = httpx.get(f"{base}/api/v1/query", params={"query": 'nccl_timeouts_total{job="nccl"}'})
            timeouts = reply.json()["data"]["result"]
        assert timeouts, "no NCCL timeout series stored"
        assert float(timeouts[0]["value"][1]) >= 1  # type: ignore[index]
        # Each first timeout of an (op, rank) counts in increase() (its counter was born with a 0 before it).
        increase = httpx.get(f"{base}/api/v1/query", params={"query": 'increase(nccl_timeouts_total{job="nccl"}[15m])'})
        counted = [float(r["value"][1]) for r in increase.json()["data"]["result"]]
        assert len(counted) == 2 and min(counted) >= 1, counted
        events = httpx.get(f"{base}/api/v1/query", params={"query": "nccl_timeout_event_timestamp_seconds"}).json()
        assert sorted(r["metric"]["seq"] for r in events["data"]["result"]) == ["4242", "77"]
        up = httpx.get(f"{base}/api/v1/query", params={"query": 'up{job="nccl"}'}).json()["data"]["result"]
        assert [r["value"][1] for r in up] == ["1"]
        versions = httpx.get(f"{base}/api/v1/query", params={"query": "nccl_info"}).json()["data"]["result"]
        assert versions and versions[0]["metric"]["version"]
    assert (tmp_path / "nccl.json").exists()
