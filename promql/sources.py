"""Sample sources the evaluator reads: the time-series store, or series held in memory
(rule unit tests, backtests of synthetic data)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from promql.evaluate import Fetched
from promql.range_funcs import Segments
from promql.vector import NAME, Labels
from store.interfaces import SeriesReader
from store.series_index import Matcher, Selector
from store.sized_cache import SizedCache
from store.types import Float64Array, Int64Array, SeriesKey

LABEL_LISTS_KEPT = 500_000  # labels over all remembered per-selector lists


def labels_of(key: SeriesKey) -> Labels:
    return tuple(sorted(((NAME, key.name), *key.labels)))


class StoreSource:
    """Reads through the store's reader: recent windows come from the in-memory head, all
    series of a selector at once (no per-series loop)."""

    def __init__(self, reader: SeriesReader) -> None:
        self.reader = reader
        self._labels: dict[int, Labels] = {}  # series id -> labels, built once per series
        # Per selector, the reader's last match list and the label list built for it. The reader
        # hands back the same match list while no series is added; the same label list then
        # goes out too, and the evaluator's per-list work (names dropped, groups of an
        # aggregation, see promql.identity_memo) is done once, not every rule cycle. A new match
        # list replaces the entry, so an old one is not kept alive.
        self._lists: SizedCache[Selector, tuple[list[tuple[int, SeriesKey]], list[Labels]]] = SizedCache(
            LABEL_LISTS_KEPT
        )

    def fetch(self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int) -> Fetched:
        selector = Selector(name, matchers)
        flat = self.reader.raw_flat(selector, start_ms + 1, end_ms)
        entry = self._lists.get(selector)
        if entry is not None and entry[0] is flat.found:
            labels = entry[1]
        else:
            labels = self._labels_of(flat.found)
            self._lists.put(selector, (flat.found, labels), len(labels))
        return Fetched(labels, Segments(flat.ts, flat.values, flat.starts, flat.counts))

    def _labels_of(self, found: list[tuple[int, SeriesKey]]) -> list[Labels]:
        cache = self._labels
        labels = []
        for sid, key in found:
            lab = cache.get(sid)
            if lab is None:
                lab = cache[sid] = labels_of(key)
            labels.append(lab)
        return labels


class MemorySource:
    """Series given as arrays; ``add`` appends, samples must arrive in time order per series."""

    def __init__(self) -> None:
        self._series: dict[SeriesKey, tuple[list[int], list[float]]] = {}
        self._frozen: dict[SeriesKey, tuple[Int64Array, Float64Array]] = {}

    def add(self, key: SeriesKey, samples: Iterable[tuple[int, float]]) -> None:
        ts, vals = self._series.setdefault(key, ([], []))
        for t, v in samples:
            ts.append(int(t))
            vals.append(float(v))
        self._frozen.pop(key, None)

    def keys(self) -> list[SeriesKey]:
        return list(self._series)

    def _arrays(self, key: SeriesKey) -> tuple[Int64Array, Float64Array]:
        arrays = self._frozen.get(key)
        if arrays is None:
            ts, vals = self._series[key]
            arrays = self._frozen[key] = (np.asarray(ts, np.int64), np.asarray(vals, np.float64))
        return arrays

    def fetch(self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int) -> Fetched:
        selector = Selector(name, matchers)
        labels, parts = [], []
        for key in self._series:
            if not selector.matches(key):
                continue
            ts, vals = self._arrays(key)
            lo, hi = np.searchsorted(ts, [start_ms, end_ms], side="right")
            labels.append(labels_of(key))
            parts.append((ts[lo:hi], vals[lo:hi]))
        return Fetched(labels, Segments.of(parts))
