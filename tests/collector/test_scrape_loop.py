"""The scrape loop with a scripted source: bookkeeping series, target labels, staleness."""

from __future__ import annotations

import asyncio
import random

import numpy as np

from collector.scrape_loop import ScrapeLoop, TargetSpec
from collector.source import Health, ScrapeResult
from store import ManualClock
from store.types import STALE_NAN, Sample, SampleBatch, SeriesKey, is_stale_marker

SPEC = TargetSpec(job="vllm", url="http://w1:8000/metrics", instance="w1:8000", labels=(("zone", "a"),))


class ScriptedSource:
    def __init__(self, results: list[ScrapeResult]) -> None:
        self.results = results

    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult:
        result = self.results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    async def close(self) -> None:
        pass


def good(*samples: tuple[SeriesKey, float]) -> ScrapeResult:
    return ScrapeResult(SampleBatch.from_samples(Sample(k, 1000, v) for k, v in samples), Health.ok())


def run(results: list[ScrapeResult]) -> list[SampleBatch]:
    stored: list[SampleBatch] = []

    async def append(batch: SampleBatch) -> None:
        stored.append(batch)

    loop = ScrapeLoop(SPEC, ScriptedSource(results), append, ManualClock(5_000), random.Random(1))

    async def main() -> None:
        for _ in range(len(results)):
            await loop.scrape_once()

    asyncio.run(main())
    return stored


def by_name(batch: SampleBatch) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.series.name, s.series.labels): s.value for s in batch.samples()}


def test_bookkeeping_series_and_target_labels() -> None:
    running = SeriesKey.of("vllm:num_requests_running", model_name="m", job="their-job")
    (batch,) = run([good((running, 3.0))])
    values = by_name(batch)
    target = (("instance", "w1:8000"), ("job", "vllm"), ("zone", "a"))
    assert values[("up", target)] == 1.0
    assert values[("scrape_samples_scraped", target)] == 1.0
    assert values[("scrape_duration_seconds", target)] >= 0.0
    labelled = tuple(sorted((("exported_job", "their-job"), ("model_name", "m"), *target)))
    assert values[("vllm:num_requests_running", labelled)] == 3.0


def test_failed_and_vanished_series_are_marked_stale() -> None:
    a, b = SeriesKey.of("a"), SeriesKey.of("b")
    batches = run(
        [
            good((a, 1.0), (b, 2.0)),
            good((a, 1.5)),  # b vanished
            ScrapeResult.failed("timeout", "http://w1:8000/metrics: no complete answer"),
            RuntimeError("source bug"),  # type: ignore[list-item]
        ]
    )
    second = batches[1].samples()
    stale_b = [s for s in second if s.series.name == "b"]
    assert len(stale_b) == 1 and is_stale_marker(np.asarray([stale_b[0].value]))[0]
    third = by_name(batches[2])
    assert third[("up", (("instance", "w1:8000"), ("job", "vllm"), ("zone", "a")))] == 0.0
    stale = [s for s in batches[2].samples() if s.series.name == "a"]
    assert len(stale) == 1 and np.float64(stale[0].value).view(np.uint64) == np.float64(STALE_NAN).view(np.uint64)
    # a raising source reads as a failed scrape and the loop goes on
    assert by_name(batches[3])[("up", (("instance", "w1:8000"), ("job", "vllm"), ("zone", "a")))] == 0.0


def test_unchanged_scrapes_reuse_the_labelled_layout_and_learn_store_ids() -> None:
    a, b = SeriesKey.of("a"), SeriesKey.of("b")
    keys = [a, b]
    same = [ScrapeResult(SampleBatch.one_per_key(keys, 1000, np.asarray([float(i), 2.0])), Health.ok()) for i in range(3)]
    stored: list[SampleBatch] = []

    async def append(batch: SampleBatch) -> None:  # an appender that resolves ids, as the store's does
        stored.append(batch)
        if batch.key_ids is None:
            batch.key_ids = np.arange(10, 10 + len(batch.keys), dtype=np.int64)

    loop = ScrapeLoop(SPEC, ScriptedSource([*same, good((a, 5.0))]), append, ManualClock(5_000), random.Random(1))

    async def main() -> None:
        for _ in range(4):
            await loop.scrape_once()

    asyncio.run(main())
    first, second, third, fourth = stored
    assert second.keys is first.keys and third.keys is first.keys  # nothing labelled again
    assert first.key_ids is not None and second.key_ids is not None
    assert second.key_ids.tolist() == first.key_ids.tolist()  # handed back to the store
    assert [v for v in by_name(third).values()][:2] == [2.0, 2.0]
    stale = [s for s in fourth.samples() if s.series.name == "b"]  # b vanished: marked stale once
    assert len(stale) == 1 and is_stale_marker(np.asarray([stale[0].value]))[0]
    assert fourth.key_ids is not None and len(fourth.key_ids) == len(fourth.keys)


def test_a_changed_key_list_labels_the_series_it_kept_with_the_same_objects() -> None:
    """The store holds the labelled keys it was first given: when a scrape's keys change (a new
    series, an engine version learnt), the series kept are labelled with those same objects
    again (no second copy of each), vanished ones are marked stale once, and a series that
    comes back after a failure gets no stale marker."""
    a, b, c = SeriesKey.of("a", x="1"), SeriesKey.of("b"), SeriesKey.of("c")
    source = ScriptedSource([good((a, 1.0), (b, 2.0)), good((a, 1.0), (b, 2.0), (c, 3.0)),
                             good((a, 1.0), (b, 2.0), (c, 3.0)), good((a, 1.0), (c, 3.0)),
                             ScrapeResult.failed("error", "down"), good((a, 1.0), (c, 3.0))])
    stored: list[SampleBatch] = []

    async def append(batch: SampleBatch) -> None:
        stored.append(batch)

    loop = ScrapeLoop(SPEC, source, append, ManualClock(5_000), random.Random(1))

    async def main() -> None:
        for i in range(6):
            if i == 2:
                source.info_keys = (SeriesKey.of("node_software_info", version="1"),)  # type: ignore[attr-defined]
            await loop.scrape_once()

    asyncio.run(main())
    first_a = next(k for k in stored[0].keys if k.name == "a")
    first_b = next(k for k in stored[0].keys if k.name == "b")
    first_c = next(k for k in stored[1].keys if k.name == "c")
    assert dict(first_a.labels)["zone"] == "a" and dict(first_a.labels)["x"] == "1"
    for batch in stored[1:]:
        for key in batch.keys:
            assert key is {"a": first_a, "b": first_b, "c": first_c}.get(key.name, key)
    assert any(k.name == "node_software_info" for k in stored[2].keys)
    stale = [[s.series.name for s in batch.samples() if is_stale_marker(np.asarray([s.value]))[0]]
             for batch in stored]
    assert stale[:4] == [[], [], [], ["b"]]
    assert sorted(stale[4]) == ["a", "c"] and stale[5] == []


def test_a_target_back_from_a_failure_reuses_its_layout() -> None:
    keys = [SeriesKey.of("a"), SeriesKey.of("b")]

    def ok() -> ScrapeResult:
        return ScrapeResult(SampleBatch.one_per_key(keys, 1000, np.asarray([1.0, 2.0])), Health.ok())

    stored: list[SampleBatch] = []
    resolved: list[int] = []

    async def append(batch: SampleBatch) -> None:
        stored.append(batch)
        if batch.key_ids is None:
            resolved.append(len(batch.keys))
            batch.key_ids = np.arange(1, 1 + len(batch.keys), dtype=np.int64)

    results = [ok(), ScrapeResult.failed("timeout", "slow"), ok(), ok()]
    loop = ScrapeLoop(SPEC, ScriptedSource(results), append, ManualClock(5_000), random.Random(1))

    async def main() -> None:
        for _ in range(4):
            await loop.scrape_once()

    asyncio.run(main())
    good1, failed, good2, good3 = stored
    assert sum(is_stale_marker(np.asarray(failed.values)).tolist()) == 2  # both series marked stale
    assert good2.keys is good1.keys and good3.keys is good1.keys  # labelled once, ids kept
    assert resolved == [len(good1.keys), len(failed.keys)]  # no lookup after the recovery
    assert good2.key_ids is not None and good2.key_ids.tolist() == good1.key_ids.tolist()  # type: ignore[union-attr]
