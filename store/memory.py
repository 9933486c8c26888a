"""Where the store's memory goes, part by part, for ``/metrics`` and the benchmarks.

numpy arrays are counted exactly (``nbytes``). Python objects are estimated: the tables' own
sizes, every posting list's array, and the deep size of a sample of the series keys and label
pairs times their count -- exact enough to tell which part holds the bytes, cheap enough to
run on every scrape of ``/metrics`` at 100 k series.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

from store.head_packed import PackedBlock

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore

SAMPLE = 64  # entries whose deep size stands for all of them
ROLLUP_ROW_BYTES = 72  # a cached rollup row: bucket, count and seven float columns


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of ``obj`` and everything it holds (strings, tuples, containers), each object once."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        size += sum(deep_size(item, seen) for item in obj)
    elif hasattr(obj, "__slots__"):
        size += sum(deep_size(getattr(obj, name), seen) for name in obj.__slots__ if hasattr(obj, name))
    elif hasattr(obj, "__dict__"):
        size += deep_size(vars(obj), seen)
    return size


@cache
def _sqlite_library() -> ctypes.CDLL | None:
    """The shared SQLite library, or None where it cannot be found. Opened by name it is the
    very copy Python's sqlite3 module uses (the loader keeps one per library), whichever
    loaded it first."""
    name = ctypes.util.find_library("sqlite3")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        lib.sqlite3_memory_used.restype = ctypes.c_int64
    except (OSError, AttributeError):
        return None
    return lib


def sqlite_heap_bytes() -> int:
    """Bytes on SQLite's heap in this process, every connection's page cache, schema and
    statements together (``sqlite3_memory_used``); 0 where the library is not found (a Python
    built with SQLite linked in statically counts its own copy, which this does not see)."""
    lib = _sqlite_library()
    return int(lib.sqlite3_memory_used()) if lib is not None else 0


def store_memory(store: TimeSeriesStore) -> dict[str, int]:
    """Bytes per part of the store (see the module doc). Takes the store's lock only to copy
    references; the sizes are added up after."""
    head, index = store.head, store.index
    postings = index._postings
    with store.lock:
        blocks = list(head._blocks)
        pending = list(head._pending)
        per_series = [head.last_ts, head.last_bits, head.flushed_until, head.head_start, head.first_ts]
        keys = list(itertools.islice(index._keys.values(), SAMPLE))
        n_keys = len(index._keys)
        ids_table = sys.getsizeof(index._ids) + sys.getsizeof(index._keys)
        lists = list(postings._ids.values())
        pairs = list(itertools.islice(postings._ids.keys(), SAMPLE))
        posting_table = sys.getsizeof(postings._ids)
        by_metric = list(index._by_metric.values())
    packed = [block for block in blocks if isinstance(block, PackedBlock)]
    plain = [block for block in blocks if not isinstance(block, PackedBlock)]
    head_bytes = sum(block.nbytes for block in plain)
    head_bytes += sum(s.nbytes + t.nbytes + v.nbytes for s, t, v in pending)
    seen: set[int] = set()
    per_key = sum(deep_size(k, seen) for k in keys) / max(len(keys), 1)
    seen = set()
    per_pair = sum(deep_size(p, seen) for p in pairs) / max(len(pairs), 1)
    # A posting list holds the same int objects as the others (one per series id): the lists'
    # own arrays, plus one int per series.
    posting_bytes = posting_table + int(per_pair * len(lists)) + sum(map(sys.getsizeof, lists)) + 32 * n_keys
    posting_bytes += sum(map(sys.getsizeof, by_metric))
    return {
        "head_samples": head_bytes,
        "head_samples_packed": sum(block.nbytes for block in packed),
        "head_per_series_arrays": sum(a.nbytes for a in per_series),
        "series_keys": int(per_key * n_keys),
        "series_id_maps": ids_table,
        "postings": posting_bytes,
        "chunk_cache": store.chunk_cache.nbytes,
        "rollup_cache": store.rollup_cache.rows * ROLLUP_ROW_BYTES,
        "wal_ledger": store.wal_ledger.nbytes,
        "sqlite_heap": sqlite_heap_bytes() if store.backend.name == "sqlite" else 0,
    }
