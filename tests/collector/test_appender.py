"""Group commit: scrapes stored several at a time, each caller answered after its own commit."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from collector.appender import BatchingAppender, combine
from store.types import Int64Array, SampleBatch, SeriesKey


class FakeStore:
    def __init__(self) -> None:
        self.appends: list[SampleBatch] = []
        self.ids: dict[SeriesKey, int] = {}

    def resolve(self, keys: Sequence[SeriesKey]) -> Int64Array:
        return np.asarray([self.ids.setdefault(k, len(self.ids) + 1) for k in keys], np.int64)

    def append(self, batch: SampleBatch) -> int:
        if any(k.name == "poison" for k in batch.keys):
            raise ValueError("refused")
        self.appends.append(batch)
        return len(batch)


def scrape(name: str, n: int, ts: int = 1000) -> SampleBatch:
    keys = [SeriesKey.of(name, i=str(i)) for i in range(n)]
    return SampleBatch.one_per_key(keys, ts, np.arange(n, dtype=np.float64))


def test_concurrent_scrapes_share_one_append_and_get_ids() -> None:
    store = FakeStore()
    writer = BatchingAppender(store, linger_s=0.05)
    batches = [scrape(f"m{t}", 3) for t in range(5)]

    async def main() -> list[object]:
        return list(await asyncio.gather(*(writer(b) for b in batches)))

    results = asyncio.run(main())
    assert len(store.appends) == 1 and len(store.appends[0]) == 15 and results == [15] * 5
    assert all(b.key_ids is not None for b in batches)  # kept for the loops' next scrapes
    stored = store.appends[0]
    assert stored.key_ids is not None
    ids = stored.key_ids[stored.key_index]
    assert sorted(ids.tolist()) == list(range(1, 16)) and ids.tolist() == sorted(ids.tolist())  # id order


def test_a_refused_batch_fails_alone() -> None:
    store = FakeStore()
    writer = BatchingAppender(store, linger_s=0.05)

    async def main() -> list[object]:
        return list(await asyncio.gather(writer(scrape("ok", 2)), writer(scrape("poison", 1)), writer(scrape("fine", 1)),
                                         return_exceptions=True))

    ok, bad, fine = asyncio.run(main())
    assert ok == 2 and fine == 1 and isinstance(bad, ValueError)
    assert sorted(len(b) for b in store.appends) == [1, 2]


def test_writer_thread_exits_when_idle_and_restarts() -> None:
    store = FakeStore()
    writer = BatchingAppender(store, linger_s=0.0, idle_exit_s=0.05)

    async def main() -> None:
        await writer(scrape("a", 1))
        await asyncio.sleep(0.3)
        assert writer._thread is None
        await writer(scrape("b", 1))

    asyncio.run(main())
    assert len(store.appends) == 2


def test_combine_keeps_every_sample() -> None:
    a, b = scrape("a", 2, ts=1), scrape("b", 3, ts=2)
    both = combine([a, b])
    assert [(s.series.name, s.ts_ms, s.value) for s in both.samples()] == [
        *((s.series.name, s.ts_ms, s.value) for s in a.samples()),
        *((s.series.name, s.ts_ms, s.value) for s in b.samples()),
    ]
    assert both.key_ids is None
    with pytest.raises(ValueError):
        SampleBatch(both.keys, both.key_index, both.ts_ms[:1], both.values)
