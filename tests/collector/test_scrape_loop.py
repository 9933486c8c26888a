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

    async def collect(self, deadline: float) -> ScrapeResult:
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
