"""Sample sources the evaluator reads: the time-series store, or series held in memory
(rule unit tests, backtests of synthetic data)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from alerts.expr.vector import NAME, Labels
from store.reader import Reader
from store.series_index import Matcher, Selector
from store.types import Float64Array, Int64Array, SeriesKey


def labels_of(key: SeriesKey) -> Labels:
    return tuple(sorted(((NAME, key.name), *key.labels)))


class StoreSource:
    """Reads through the store's reader: recent windows come from the in-memory head."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def fetch(
        self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int
    ) -> Sequence[tuple[Labels, Int64Array, Float64Array]]:
        found = self.reader.raw(Selector(name, matchers), start_ms + 1, end_ms)
        return [(labels_of(s.key), s.ts_ms, s.values) for s in found]


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

    def fetch(
        self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int
    ) -> Sequence[tuple[Labels, Int64Array, Float64Array]]:
        selector = Selector(name, matchers)
        out = []
        for key in self._series:
            if not selector.matches(key):
                continue
            ts, vals = self._arrays(key)
            lo, hi = np.searchsorted(ts, [start_ms, end_ms], side="right")
            out.append((labels_of(key), ts[lo:hi], vals[lo:hi]))
        return out
