"""Scrape timestamps on the target's schedule (as Prometheus's 2 ms timestamp tolerance): a few
ms of timer jitter no longer reaches the stored timestamps, larger deviations do."""

from __future__ import annotations

import asyncio
import random

from collector.scrape_loop import ScrapeLoop, TargetSpec
from collector.scrape_time import ScrapeTimeAligner
from collector.source import Health, ScrapeResult
from store import ManualClock
from store.types import Sample, SampleBatch, SeriesKey

T = 1_800_000_000_000


def stamps(aligner: ScrapeTimeAligner, offsets: list[int]) -> list[int]:
    return [aligner.stamp(T + offset) - T for offset in offsets]


def test_jitter_within_the_tolerance_lands_on_the_schedule() -> None:
    aligner = ScrapeTimeAligner(15.0)
    assert stamps(aligner, [0, 15_001, 29_999, 45_002, 60_000, 74_998]) == [0, 15_000, 30_000, 45_000, 60_000, 75_000]


def test_a_larger_deviation_is_kept_and_the_schedule_follows_it() -> None:
    aligner = ScrapeTimeAligner(15.0)
    assert stamps(aligner, [0, 15_010, 30_011, 45_009]) == [0, 15_010, 30_010, 45_010]


def test_skipped_ticks_and_early_wakeups() -> None:
    aligner = ScrapeTimeAligner(15.0)
    assert stamps(aligner, [0, 45_001, 59_999]) == [0, 45_000, 60_000]  # an overrun skipped two ticks


def test_short_intervals_and_a_zero_tolerance_are_not_aligned() -> None:
    assert stamps(ScrapeTimeAligner(0.1), [0, 101, 199]) == [0, 101, 199]  # 100 ms <= 100 x 2 ms
    assert stamps(ScrapeTimeAligner(15.0, tolerance_ms=0), [0, 15_001]) == [0, 15_001]


def test_a_clock_that_steps_back_is_not_aligned_forward() -> None:
    aligner = ScrapeTimeAligner(15.0)
    assert stamps(aligner, [0, 15_000, 14_000]) == [0, 15_000, 14_000]


class RecordingSource:
    def __init__(self) -> None:
        self.given: list[int | None] = []

    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult:
        self.given.append(ts_ms)
        assert ts_ms is not None
        return ScrapeResult(SampleBatch.from_samples([Sample(SeriesKey.of("x"), ts_ms, 1.0)]), Health.ok())

    async def close(self) -> None:
        pass


def test_the_scrape_loop_stamps_the_source_and_its_own_series_on_the_schedule() -> None:
    clock = ManualClock(T)
    source = RecordingSource()
    stored: list[SampleBatch] = []

    async def append(batch: SampleBatch) -> None:
        stored.append(batch)

    spec = TargetSpec(job="vllm", url="http://w1:8000/metrics", instance="w1:8000", interval_s=15.0)
    loop = ScrapeLoop(spec, source, append, clock, random.Random(1))

    async def main() -> None:
        for offset in (0, 15_001, 29_998, 45_000, 60_020):
            clock.set(T + offset)
            await loop.scrape_once()

    asyncio.run(main())
    expected = [T, T + 15_000, T + 30_000, T + 45_000, T + 60_020]
    assert source.given == expected
    for batch, ts in zip(stored, expected):
        assert set(batch.ts_ms.tolist()) == {ts}  # `up`, the scrape series and the source's samples
