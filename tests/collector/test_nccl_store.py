"""NCCL timeouts through the real path: NcclLogSource -> ScrapeLoop -> SQLite store -> the rule
language. The first timeout of an (op, rank) must make ``increase(nccl_timeouts_total[15m])``
count it, which needs the 0 the source writes just before a counter's first sample."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from collector.nccl import NcclLogSource
from collector.scrape_loop import ScrapeLoop, TargetSpec
from promql import EvalContext, Vector, parse
from promql.sources import StoreSource
from store import ManualClock, TimeSeriesStore
from store.reader import Reader
from store.series_index import Selector
from store.types import SampleBatch, is_stale_marker
from tests.collector.nccl_fixtures import timeout_line
from tests.conftest import T0, StoreFactory

SPEC = TargetSpec(job="nccl", url="file://gpu-node-01/nccl", instance="gpu-node-01", interval_s=15.0, kind="nccl")
STEP_MS = 15_000


class Rig:
    """One NCCL target scraped every 15 s into a real store, on a manual clock."""

    def __init__(self, store: TimeSeriesStore, clock: ManualClock, logs: Path, state: Path) -> None:
        self.store, self.clock, self.log = store, clock, logs / "train.log"
        self.log.write_text("Epoch 1 step 10 loss 2.31\n")
        source = NcclLogSource([str(logs / "*.log")], state, clock)

        async def append(batch: SampleBatch) -> None:
            store.append(batch)

        self.loop = ScrapeLoop(SPEC, source, append, clock, random.Random(1))

    def scrape(self, times: int = 1) -> None:
        for _ in range(times):
            asyncio.run(self.loop.scrape_once())
            self.clock.advance(STEP_MS)

    def write(self, text: str) -> None:
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(text)

    def evaluate(self, expr: str, at_ms: int) -> dict[str, float]:
        value = EvalContext(StoreSource(Reader(self.store)), at_ms).evaluate(parse(expr))
        assert isinstance(value, Vector)
        return {",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k in ("op", "rank")): v
                for labels, v in value.as_dicts()}

    def stored(self, metric: str) -> dict[str, list[tuple[int, float]]]:
        out = {}
        for series in Reader(self.store).raw(Selector(metric), T0 - 3_600_000, T0 + 3_600_000):
            keep = ~is_stale_marker(series.values)
            out[f"{series.key.get('op')},{series.key.get('rank')}"] = list(
                zip((series.ts_ms[keep] - T0).tolist(), series.values[keep].tolist()))
        return out


@pytest.fixture
def rig(make_store: StoreFactory, clock: ManualClock, tmp_path: Path) -> Rig:
    (tmp_path / "logs").mkdir()
    return Rig(make_store(), clock, tmp_path / "logs", tmp_path / "nccl.json")


INCREASE = "increase(nccl_timeouts_total[15m])"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_the_first_timeout_of_a_rank_counts_in_increase(rig: Rig) -> None:
    rig.scrape(2)  # a healthy job: no NCCL series yet
    rig.write(timeout_line(3, 808))
    rig.scrape(4)  # read at T0 + 30 s
    assert rig.stored("nccl_timeouts_total") == {
        "ALLREDUCE,3": [(29_999, 0.0), (30_000, 1.0), (45_000, 1.0), (60_000, 1.0), (75_000, 1.0)],
    }
    for at in (30_000, 45_000, 60_000, 75_000):  # at the scrapes: exactly one
        assert rig.evaluate(INCREASE, T0 + at) == {"op=ALLREDUCE,rank=3": 1.0}, at
    # Between scrapes Prometheus-style extrapolation may stretch it, never below the one timeout.
    assert all(v >= 1 for at in range(30_000, 15 * 60_000, 7_000) for v in rig.evaluate(INCREASE, T0 + at).values())
    assert rig.evaluate(INCREASE, T0 + 30_000 + 15 * 60_000) == {"op=ALLREDUCE,rank=3": 0.0}  # 15 min later: over
    assert rig.evaluate(f"sum by (job, instance) ({INCREASE}) >= 1", T0 + 60_000) == {"": 1.0}
    (event,) = Reader(rig.store).raw(Selector("nccl_timeout_event_timestamp_seconds"), T0, T0 + 600_000)
    assert (event.key.get("seq"), event.key.get("rank"), event.key.get("instance")) == ("808", "3", "gpu-node-01")
    assert set(event.values.tolist()) == {(T0 + 30_000) / 1000}  # the time it was read, in every sample


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_three_timeouts_on_three_pairs_give_three_increases_of_one(rig: Rig) -> None:
    rig.scrape()
    rig.write(timeout_line(0, 41, op="ALLREDUCE") + timeout_line(5, 41, op="ALLGATHER"))
    rig.scrape()
    rig.write(timeout_line(6, 7, op="BROADCAST"))
    rig.scrape(3)
    stored = rig.stored("nccl_timeouts_total")
    assert {pair: points[:2] for pair, points in stored.items()} == {
        "ALLREDUCE,0": [(14_999, 0.0), (15_000, 1.0)],
        "ALLGATHER,5": [(14_999, 0.0), (15_000, 1.0)],
        "BROADCAST,6": [(29_999, 0.0), (30_000, 1.0)],
    }
    assert rig.evaluate(INCREASE, T0 + 60_000) == {"op=ALLREDUCE,rank=0": 1.0, "op=ALLGATHER,rank=5": 1.0,
                                                   "op=BROADCAST,rank=6": 1.0}
    assert rig.evaluate(f"sum by (job, instance) ({INCREASE})", T0 + 60_000) == {"": 3.0}
    assert len(Reader(rig.store).raw(Selector("nccl_timeout_event_timestamp_seconds"), T0, T0 + 600_000)) == 3
