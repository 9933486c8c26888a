"""Scrape timestamps on the target's schedule (as Prometheus's 2 ms timestamp tolerance): a few
ms of timer jitter no longer reaches the stored timestamps, larger deviations do."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

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


def test_every_source_stamps_its_samples_with_the_scrape_timestamp_it_is_given(tmp_path: Path) -> None:
    """The loop's timestamp (on the schedule) reaches the samples of each kind of source; without
    one a source reads its clock; a timestamp an exposition line carries is kept."""
    from collector.http_source import HttpExpositionSource
    from collector.nccl.source import NcclLogSource
    from collector.nvml.source import NvmlGpuSource
    from tests.collector.test_nccl_source import WARN
    from tests.collector.test_nvml_source import FakeNvml

    given = T + 15_000

    async def nvml() -> tuple[set[int], set[int]]:
        source = NvmlGpuSource(ManualClock(T + 15_001), "node-a", nvml=FakeNvml())  # type: ignore[arg-type]
        deadline = asyncio.get_running_loop().time() + 5
        stamped = set((await source.collect(deadline, given)).batch.ts_ms.tolist())
        own = set((await source.collect(deadline)).batch.ts_ms.tolist())
        return stamped, own

    assert asyncio.run(nvml()) == ({given}, {T + 15_001})

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_text(WARN)
    (tmp_path / "t.prom").write_text("nccl_custom 1\n")
    nccl = NcclLogSource([str(tmp_path / "logs" / "*.log"), str(tmp_path / "*.prom")], tmp_path / "state.json",
                         ManualClock(T + 15_001))

    async def nccl_collect() -> set[int]:
        result = await nccl.collect(asyncio.get_running_loop().time() + 5, given)
        assert result.health.up and len(result.batch)
        return set(result.batch.ts_ms.tolist())

    # a counter's first scrape also carries its zero just before (so that increase() counts it)
    assert asyncio.run(nccl_collect()) == {given - 1, given}

    async def http(url: str) -> list[int]:
        async with httpx.AsyncClient() as fallback:
            source = HttpExpositionSource(url, fallback, ManualClock(T + 15_001))
            result = await source.collect(asyncio.get_running_loop().time() + 5, given)
            await source.close()
            return sorted(result.batch.ts_ms.tolist())

    assert asyncio.run(_served(b"plain 1\nown 2 1700000000000\n", http)) == [1_700_000_000_000, given]


async def _served(body: bytes, check: Callable[[str], Awaitable[list[int]]]) -> list[int]:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        return await check(f"http://127.0.0.1:{port}/metrics")
