"""The agent's appender: every scrape handed over is on disk when its await returns, in the
order handed over; scrapes that arrive while a write is under way share the next fsync; a
failing disk fails the scrapes that waited on it, and the writer goes on."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from collector.remote_write.appender import QueueAppender
from collector.remote_write.proto import sample_count
from collector.remote_write.queue import DiskQueue
from collector.remote_write.sender import Sender
from store import ManualClock
from store.types import SampleBatch, SeriesKey


def _batch(value: int) -> SampleBatch:
    keys = [SeriesKey.of("seq_total", {"i": str(i)}) for i in range(3)]
    return SampleBatch(keys, np.arange(3), np.full(3, 1_800_000_000_000 + value, np.int64), np.full(3, float(value)))


def _appender(tmp: Path) -> tuple[QueueAppender, DiskQueue]:
    queue = DiskQueue(tmp / "q")
    sender = Sender("http://127.0.0.1:9/api/v1/write", queue, httpx.AsyncClient())
    return QueueAppender([sender], {"cluster": "c"}, ManualClock(1_800_000_000_000)), queue


def test_concurrent_scrapes_are_all_on_disk_in_order_with_shared_fsyncs(tmp_path: Path) -> None:
    appender, queue = _appender(tmp_path)
    calls: list[int] = []
    real = queue.put_many

    def slow_put_many(bodies: list[tuple[bytes, int, int]]) -> None:
        calls.append(len(bodies))
        time.sleep(0.05)  # a slow disk: the other scrapes arrive meanwhile
        real(bodies)

    queue.put_many = slow_put_many  # type: ignore[method-assign]

    async def scrape_all() -> None:
        await asyncio.gather(*(appender(_batch(v)) for v in range(20)))

    asyncio.run(scrape_all())
    appender.close()
    assert sum(calls) == 20 and len(calls) < 20, calls  # grouped
    records = queue.peek(100)
    assert [r.samples for r in records] == [3] * 20 and appender.samples_enqueued == 60
    assert [sample_count(r.payload) for r in records] == [3] * 20
    assert queue.stats.records == 20


def test_a_failing_disk_fails_the_waiting_scrapes_and_the_writer_goes_on(tmp_path: Path) -> None:
    appender, queue = _appender(tmp_path)
    real = queue.put_many
    broken = [True]

    def flaky(bodies: list[tuple[bytes, int, int]]) -> None:
        if broken[0]:
            raise OSError(28, "No space left on device")
        real(bodies)

    queue.put_many = flaky  # type: ignore[method-assign]

    async def scrape(value: int) -> None:
        await appender(_batch(value))

    with pytest.raises(OSError, match="No space left"):
        asyncio.run(scrape(1))
    broken[0] = False
    asyncio.run(scrape(2))  # a new loop, the same writer thread
    appender.close()
    assert queue.stats.records == 1 and appender.samples_enqueued == 3
