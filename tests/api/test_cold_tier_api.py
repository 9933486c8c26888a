"""A PromQL query over a range whose cold-tier file is corrupt answers with the rest of the
data and Prometheus's ``warnings`` naming the file; a range that is whole has none."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np

from infermeter.settings import GpuSettings, ScrapeSettings, Settings, StoreSettings
from infermeter.settings_store import ColdTierSettings
from store import ManualClock, SampleBatch, SeriesKey
from tests.service import serve

DAY = 86_400_000
END = 1_800_000_000_000 // DAY * DAY
STEP = 600_000


def test_a_corrupt_cold_file_gives_a_partial_answer_with_a_warning(sqlite_url: str, tmp_path: Path) -> None:
    cold = tmp_path / "cold"
    settings = Settings(store=StoreSettings(url=sqlite_url, cold_tier=ColdTierSettings(url=str(cold), after="2d")),
                        gpu=GpuSettings(nvml="off"), scrape=ScrapeSettings(targets=[]))
    clock = ManualClock(END - 6 * DAY)
    keys = [SeriesKey.of("gpu_temperature_celsius", gpu=str(g), host="node-a") for g in range(4)]
    with serve(settings, clock) as (base, runtime):
        store = runtime.tsdb
        assert store is not None
        for ts in range(END - 6 * DAY, END, STEP):
            clock.set(ts)
            store.append(SampleBatch.one_per_key(keys, ts, np.full(len(keys), 60.0 + (ts // STEP) % 7)))
        clock.set(END)
        store.checkpoint(force=True)
        assert store.tier_cold(END).chunks > 0
        params = {"query": "max_over_time(gpu_temperature_celsius[30m])", "start": (END - 5 * DAY) / 1000,
                  "end": (END - 1) / 1000, "step": "3600"}
        whole = httpx.get(f"{base}/api/v1/query_range", params=params).json()
        assert whole["status"] == "success" and "warnings" not in whole
        points = {r["metric"]["gpu"]: len(r["values"]) for r in whole["data"]["result"]}
        assert points == {str(g): 120 for g in range(4)}
        next(cold.iterdir()).write_bytes(b"not parquet at all")
        store.chunk_cache.resize(0)  # the decoded chunks would otherwise still answer
        partial = httpx.get(f"{base}/api/v1/query_range", params=params).json()
        assert partial["status"] == "success"
        assert len(partial["warnings"]) == 1 and "partial data" in partial["warnings"][0]
        assert str(cold) in partial["warnings"][0]
        assert all(0 < len(r["values"]) < 120 for r in partial["data"]["result"])  # the hot days still answer
        instant = httpx.get(f"{base}/api/v1/query", params={"query": "count_over_time(gpu_temperature_celsius[1d])",
                                                           "time": (END - 4 * DAY) / 1000}).json()
        assert instant["status"] == "success" and "partial data" in instant["warnings"][0]
        hot = httpx.get(f"{base}/api/v1/query", params={"query": "gpu_temperature_celsius", "time": (END - STEP) / 1000}).json()
        assert "warnings" not in hot and len(hot["data"]["result"]) == 4
