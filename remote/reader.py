"""The store's reader interface over a remote engine: what rules, the cost ledger, the dashboard
and reports read from :class:`store.Reader` on one node, they read from here in a fleet.

Selections are the engine's series API; raw samples come back as an instant query of a range
selector; stepped range queries fold those samples with the embedded reader's own code
(:func:`store.reader.fold_range`), so a panel or a ledger line is the same number on either
backend (the engine's ``*_over_time`` windows are ``(t - d, t]`` where ours are ``[t, t + step)``,
and its ``increase`` extrapolates: pushing them down would change the figures). PromQL --
rules, ``/api/v1/query`` -- runs in the engine instead (:mod:`remote.source`).

Series ids are positions within one answer: the engine has no ids of ours to keep stable.
"""

from __future__ import annotations

import numpy as np

from remote.client import EngineClient
from store.clock import Clock
from store.reader import (
    FlatSamples,
    RangeQuery,
    RawSeries,
    SeriesResult,
    fold_range,
    range_lookback,
    stepped_quantile,
)
from store.rollup import Frame
from store.series_index import Selector
from store.types import SeriesKey

# How far back ``select`` (every series of a selector) looks; the engine's series API needs a
# start, and a week is the embedded store's raw retention.
SELECT_WINDOW_MS = 7 * 86_400_000


def key_of(labels: dict[str, str]) -> SeriesKey:
    return SeriesKey(labels.get("__name__", ""), tuple((k, v) for k, v in labels.items() if k != "__name__"))


def _numbered(labels: list[dict[str, str]]) -> list[tuple[int, SeriesKey]]:
    keys = sorted({key_of(lab) for lab in labels}, key=lambda k: (k.name, k.labels))
    return list(enumerate(keys))


class RemoteReader:
    def __init__(self, client: EngineClient, clock: Clock) -> None:
        self.client = client
        self.clock = clock

    # -- selection ---------------------------------------------------------------------------
    def select(self, selector: Selector) -> list[tuple[int, SeriesKey]]:
        now = self.clock.now_ms()
        return _numbered(self.client.series(selector, now - SELECT_WINDOW_MS, now))

    def active(self, selector: Selector, start_ms: int, end_ms: int) -> list[tuple[int, SeriesKey]]:
        return _numbered(self.client.series(selector, start_ms, end_ms))

    # -- raw ---------------------------------------------------------------------------------
    def raw(self, selector: Selector, start_ms: int, end_ms: int) -> list[RawSeries]:
        found = self.client.raw(selector, start_ms, end_ms)
        out = [RawSeries(key_of(lab), ts, val) for lab, ts, val in zip(found.labels, found.ts, found.values)]
        out.sort(key=lambda r: (r.key.name, r.key.labels))
        return out

    def raw_flat(self, selector: Selector, start_ms: int, end_ms: int) -> FlatSamples:
        series = self.raw(selector, start_ms, end_ms)
        counts = np.fromiter((len(s.ts_ms) for s in series), np.int64, len(series))
        starts = np.zeros(len(series), np.int64)
        if len(series) > 1:
            np.cumsum(counts[:-1], out=starts[1:])
        ts = np.concatenate([s.ts_ms for s in series]) if series else np.empty(0, np.int64)
        values = np.concatenate([s.values for s in series]) if series else np.empty(0)
        return FlatSamples([(i, s.key) for i, s in enumerate(series)], starts, counts, ts, values)

    def instant(self, selector: Selector, at_ms: int, lookback_ms: int = 300_000) -> list[tuple[SeriesKey, int, float]]:
        """Newest sample of each series in (at - lookback, at] (engines drop staleness markers
        from raw answers, so a stale series simply has no sample after its marker)."""
        out = []
        for series in self.raw(selector, at_ms - lookback_ms + 1, at_ms):
            if len(series.ts_ms):
                out.append((series.key, int(series.ts_ms[-1]), float(series.values[-1])))
        return out

    # -- stepped range -----------------------------------------------------------------------
    def range(self, query: RangeQuery) -> list[SeriesResult]:
        origin = query.start_ms // query.step_ms * query.step_ms
        series = self.raw(query.selector, origin - range_lookback(query), query.end_ms)
        if not series:
            return []
        found = [(i, s.key) for i, s in enumerate(series)]
        frame = Frame.concat([
            Frame.from_samples(np.full(len(s.ts_ms), i, np.int64), s.ts_ms, s.values) for i, s in enumerate(series)
        ])
        return fold_range(query, found, frame, "remote")

    def histogram_quantile(
        self, q: float, bucket_selector: Selector, start_ms: int, end_ms: int, step_ms: int, by: tuple[str, ...] = ()
    ) -> list[SeriesResult]:
        return stepped_quantile(self.range, q, bucket_selector, start_ms, end_ms, step_ms, by)
