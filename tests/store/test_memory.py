"""The store's memory by part: numpy parts exact, Python objects estimated from a sample close
to their whole deep size."""

from __future__ import annotations

import ctypes.util
import sqlite3

import numpy as np
import pytest

from store import SampleBatch, SeriesKey, StoreOptions, memory
from store.memory import deep_size, sqlite_heap_bytes, store_memory
from tests.conftest import T0, StoreFactory


def test_memory_parts_count_the_head_exactly_and_estimate_the_index(make_store: StoreFactory) -> None:
    store = make_store(StoreOptions())
    keys = [SeriesKey.of("gpu_power_watts", gpu=str(g % 8), host=f"node-{g // 8:04d}", model=f"m{g % 3}")
            for g in range(2000)]
    for i in range(5):
        store.append(SampleBatch.one_per_key(keys, T0 + i * 15_000, np.full(len(keys), float(i))))
    parts = store_memory(store)
    head = store.head
    exact = sum(s.nbytes + t.nbytes + v.nbytes for s, t, v in head._pending) + sum(
        b.usid.nbytes + b.offs.nbytes + b.ts.nbytes + b.val.nbytes for b in head._blocks)
    assert parts["head_samples"] == exact >= 5 * 2000 * 16
    assert parts["head_per_series_arrays"] == 5 * 8 * head.capacity
    whole = deep_size(list(store.index._keys.values()))
    assert 0.7 * whole <= parts["series_keys"] <= 1.3 * whole
    postings = store.index._postings._ids
    whole_postings = deep_size(postings)
    assert 0.7 * whole_postings <= parts["postings"] <= 1.5 * whole_postings
    assert parts["series_id_maps"] > 0 and parts["chunk_cache"] == 0 and parts["rollup_cache"] == 0
    assert parts["wal_ledger"] == 16 * 1024  # five rows, in its first allocation
    if store.engine.dialect.name == "sqlite":
        assert parts["sqlite_heap"] > 0  # the store's connections: schema, statements, page caches
    else:
        assert parts["sqlite_heap"] == 0


def test_sqlite_heap_follows_a_connections_page_cache() -> None:
    before = sqlite_heap_bytes()
    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA cache_size=-16384")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.executemany("INSERT INTO t VALUES (?)", [(bytes(1000),) for _ in range(8000)])  # ~8 MB of pages
    held = sqlite_heap_bytes()
    conn.close()
    assert held - before > 6_000_000
    assert sqlite_heap_bytes() - before < 1_000_000


def test_deep_size_counts_shared_objects_once() -> None:
    text = "x" * 1000
    assert deep_size([text, text]) < deep_size([text, "y" * 1000])


def test_sqlite_heap_reads_zero_where_the_library_cannot_be_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python whose SQLite is linked in statically: no shared library to ask, 0 and no error."""
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    memory._sqlite_library.cache_clear()
    try:
        assert sqlite_heap_bytes() == 0
    finally:
        memory._sqlite_library.cache_clear()  # the real library again for the tests after
