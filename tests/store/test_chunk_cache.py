"""The decoded-chunk cache: reads answered from it are bit-for-bit the reads without it, over
any mix of cached and uncached chunks, within its byte budget, on SQLite and PostgreSQL; and a
chunk deleted between listing and reading is read as gone, not as an error."""

from __future__ import annotations

import math

import numpy as np

from store import STALE_NAN, ManualClock, Matcher, Reader, Selector, StoreOptions
from store.chunk_reads import _decode
from tests.conftest import T0, StoreFactory
from tests.store.test_store import HOUR, MIN, batch, fill, util

WINDOWS = [(T0 + 20 * MIN, T0 + 40 * MIN), (T0, T0 + 3 * HOUR), (T0 + 50 * MIN, T0 + 2 * HOUR + 5 * MIN)]
SELECTORS = [Selector("gpu_util"), Selector("gpu_util", (Matcher("host", "=", "b"),))]


def _value(k: int, i: int) -> float:
    if (k + i) % 11 == 0:
        return math.nan
    if k % 3 == 0:
        return (k * 13 + i) % 50 + 0.1  # not exact as float32: kept as float64
    if k % 3 == 1:
        return float(2**40 + i * 1_000_003)  # a counter past float32's integers
    return float((k * 7 + i) % 100)


def _snapshot(reader: Reader) -> list[tuple[list[int], list[int]]]:
    out = []
    for start, stop in WINDOWS:
        for selector in SELECTORS:
            flat = reader.raw_flat(selector, start, stop)
            out.append((flat.ts.tolist(), flat.values.view(np.uint64).tolist()))
    return out


def test_cached_reads_equal_uncached_ones_within_the_budget(make_store: StoreFactory, clock: ManualClock) -> None:
    store = make_store(StoreOptions(chunk_range_ms=HOUR, head_retain_ms=10 * MIN))
    keys = [util(str(g), host) for g in range(6) for host in ("a", "b")]
    fill(store, keys, T0, 3 * 240, 15_000, _value)
    store.append(batch((keys[4], T0 + 3 * 240 * 15_000, STALE_NAN)))
    store.maintain()
    reader = Reader(store)
    cache = store.chunk_cache
    budget = cache.max_bytes
    cache.resize(0)
    expected = _snapshot(reader)
    assert cache.hits == 0 and cache.nbytes == 0
    cache.resize(budget)
    reader.raw_flat(SELECTORS[1], *WINDOWS[0])  # some chunks cached, the rest not: a mixed read next
    assert _snapshot(reader) == expected
    assert cache.hits > 0 and cache.misses > 0
    hits = cache.hits
    assert _snapshot(reader) == expected  # all from the cache now
    assert cache.hits > hits and cache.nbytes > 0
    cache.resize(3_000)  # a few chunks' worth: entries go, answers stay the same
    assert _snapshot(reader) == expected
    assert 0 < cache.nbytes <= 3_000


def test_a_chunk_deleted_while_it_was_read_reads_as_gone(make_store: StoreFactory, clock: ManualClock) -> None:
    store = make_store(StoreOptions(chunk_range_ms=HOUR, head_retain_ms=10 * MIN))
    keys = [util("0"), util("1")]
    fill(store, keys, T0, 3 * 240, 15_000, _value)
    store.maintain()
    rows = list(store.engine.connect().exec_driver_sql(
        "SELECT id, series_id, start_ms, end_ms, n FROM chunks ORDER BY series_id, start_ms"))
    listed = [tuple(int(x) for x in r) for r in rows]
    assert len(listed) >= 4
    vanished = (10**9, *listed[0][1:])  # an id no row has (any more)
    decoded = _decode(store, [listed[0], vanished, listed[1]])  # type: ignore[list-item]
    assert decoded.counts.tolist() == [listed[0][4], 0, listed[1][4]]
    assert len(decoded.ts) == listed[0][4] + listed[1][4]
