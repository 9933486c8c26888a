"""Where the store's memory goes, part by part, for ``/metrics`` and the benchmarks.

numpy arrays are counted exactly (``nbytes``). Python objects (series keys, the id maps, the
postings) are estimated: the containers' own sizes plus the deep size of a sample of their
entries times their count -- exact enough to tell which part holds the bytes, cheap enough
to run on every scrape of ``/metrics`` at 100 k series.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sized
from typing import TYPE_CHECKING, Any

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


def estimated(container: Sized, entries: Iterable[Any]) -> int:
    """The container's own bytes plus its entries' deep size, from a sample of them."""
    n = len(container)
    if n == 0:
        return sys.getsizeof(container)
    sample = []
    for i, entry in enumerate(entries):
        if i >= SAMPLE:
            break
        sample.append(entry)
    seen: set[int] = set()  # strings shared by entries (label names, common values) count once
    per = sum(deep_size(entry, seen) for entry in sample) / max(len(sample), 1)
    return sys.getsizeof(container) + int(per * n)


def store_memory(store: TimeSeriesStore) -> dict[str, int]:
    """Bytes per part of the store (see the module doc)."""
    head = store.head
    blocks = sum(b.usid.nbytes + b.offs.nbytes + b.ts.nbytes + b.val.nbytes + (b._key.nbytes if b._key is not None else 0)
                 for b in head._blocks)
    pending = sum(s.nbytes + t.nbytes + v.nbytes for s, t, v in head._pending)
    per_series = sum(a.nbytes for a in (head.last_ts, head.last_bits, head.flushed_until, head.head_start, head.first_ts))
    index = store.index
    keys = estimated(index._keys, index._keys.values())  # the SeriesKey objects, once
    ids = sys.getsizeof(index._ids)  # the same keys, mapped back: only the table is extra
    postings = index._postings
    posting_lists = estimated(postings._ids, ((k, v) for k, v in postings._ids.items()))
    by_metric = estimated(index._by_metric, index._by_metric.items())
    return {
        "head_samples": blocks + pending,
        "head_per_series_arrays": per_series,
        "series_keys": keys,
        "series_id_map": ids,
        "postings": posting_lists + by_metric,
        "chunk_cache": store.chunk_cache.nbytes,
        "rollup_cache": store.rollup_cache.rows * ROLLUP_ROW_BYTES,
    }
