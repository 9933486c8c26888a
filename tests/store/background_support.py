"""What the background-checkpoint tests share: the store they open on either backend, a
scrape of twenty series, waiting for the checkpoint thread, and every sample read back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from store import ManualClock, Reader, SampleBatch, Selector, SeriesKey, StoreOptions, TimeSeriesStore
from store.engine import create_store_engine

MIN = 60_000
HOUR = 3_600_000
KEYS = [SeriesKey.of("gpu_util", gpu=str(i), host="node-a") for i in range(20)]


@pytest.fixture
def opened(store_url: str) -> Iterator[Callable[..., TimeSeriesStore]]:
    stores: list[TimeSeriesStore] = []

    def open_store(clock: ManualClock, background: bool = True) -> TimeSeriesStore:
        store = TimeSeriesStore(create_store_engine(store_url), clock,
                                StoreOptions(background_checkpoints=background, checkpoint_grace_ms=0))
        store.open()
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        store.close(flush=False)
        store.engine.dispose()


def scrape(store: TimeSeriesStore, ts: int, value: float) -> Any:
    store.clock.set(ts)  # type: ignore[attr-defined]
    return store.append(SampleBatch.one_per_key(KEYS, ts, np.full(len(KEYS), value)))


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def every_sample(store: TimeSeriesStore) -> dict[str, tuple[list[int], list[float]]]:
    return {s.key.get("gpu") or "": (s.ts_ms.tolist(), s.values.tolist())
            for s in Reader(store).raw(Selector("gpu_util"), 0, 2**62)}
