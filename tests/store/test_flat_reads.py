"""Flat reads (one vectorised head search, chunks only where the head does not reach) against
the per-series reads they replace on the rules' hot path."""

from __future__ import annotations

import math

import numpy as np

from store import STALE_NAN, ManualClock, Matcher, Reader, Selector, StoreOptions
from tests.conftest import StoreFactory
from tests.store.test_store import HOUR, MIN, T0, batch, fill, util


def test_flat_reads_equal_per_series_reads(make_store: StoreFactory, clock: ManualClock) -> None:
    """raw_flat (one vectorised head search, chunks only where the head does not reach) returns
    exactly what raw returns, for windows inside the head, across a checkpoint, and older."""
    store = make_store(StoreOptions(chunk_range_ms=HOUR))
    keys = [util(str(g), host) for g in range(5) for host in ("a", "b")]
    fill(store, keys, T0, 3 * 240, 15_000, lambda k, i: float((k * 13 + i) % 50) if (k + i) % 7 else math.nan)
    store.append(batch((keys[3], T0 + 3 * 240 * 15_000, STALE_NAN)))
    store.maintain()
    reader = Reader(store)
    end = T0 + 3 * HOUR
    for start, stop in ((end - 10 * MIN, end), (T0 + 30 * MIN, T0 + 2 * HOUR), (T0, end), (end + MIN, end + HOUR)):
        for selector in (Selector("gpu_util"), Selector("gpu_util", (Matcher("host", "=", "b"),)), Selector("nothing")):
            per_series = reader.raw(selector, start, stop)
            flat = reader.raw_flat(selector, start, stop)
            assert [k for _, k in flat.found] == [s.key for s in per_series]
            for i, series in enumerate(per_series):
                a, n = int(flat.starts[i]), int(flat.counts[i])
                assert flat.ts[a : a + n].tolist() == series.ts_ms.tolist()
                assert flat.values[a : a + n].view(np.uint64).tolist() == series.values.view(np.uint64).tolist()
