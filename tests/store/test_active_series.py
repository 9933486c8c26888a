"""Reader.active: which selected series have a sample in a time range, from the head and from
chunk time bounds alone (what /api/v1/labels, label values and series use with start/end)."""

from __future__ import annotations

import numpy as np

from store import ManualClock, StoreOptions, TimeSeriesStore
from store.reader import Reader
from store.series_index import Matcher, Selector
from store.types import SampleBatch, SeriesKey
from tests.conftest import T0, StoreFactory

HOUR = 3_600_000


def test_active_from_chunks_and_head(make_store: StoreFactory, clock: ManualClock) -> None:
    store = make_store(StoreOptions(out_of_order_window_ms=6 * HOUR))
    old, recent = SeriesKey.of("m", s="old"), SeriesKey.of("m", s="recent")
    stamps = T0 + np.arange(0, HOUR, 15_000, dtype=np.int64)
    clock.set(T0 + 4 * HOUR)
    store.append(SampleBatch([old], np.zeros(len(stamps), np.int64), stamps, np.ones(len(stamps))))
    late = stamps + 3 * HOUR
    store.append(SampleBatch([recent], np.zeros(len(late), np.int64), late, np.ones(len(late))))
    store.close(flush=True)  # everything into chunks; a reopened head starts empty
    reopened = TimeSeriesStore(store.engine, clock, StoreOptions())
    reopened.open()
    reader = Reader(reopened)
    sel = Selector("m", ())

    def names(start: int, end: int) -> list[str]:
        return [key.get("s") for _, key in reader.active(sel, start, end)]

    sids = np.asarray([sid for sid, _ in reader.select(sel)], np.int64)
    assert reopened.head_window(sids, T0, T0 + 4 * HOUR).counts.sum() == 0  # only chunks answer these
    assert names(T0, T0 + HOUR) == ["old"]
    assert names(T0 + 3 * HOUR, T0 + 4 * HOUR) == ["recent"]
    assert names(T0 + HOUR + 60_000, T0 + 3 * HOUR - 60_000) == []  # the gap between them
    assert names(T0 - HOUR, T0 + 5 * HOUR) == ["old", "recent"]
    assert reader.active(Selector("m", (Matcher("s", "=", "none"),)), T0, T0 + 5 * HOUR) == []
    reopened.append(SampleBatch([recent], np.zeros(1, np.int64), np.asarray([T0 + 4 * HOUR + 15_000]), np.ones(1)))
    assert names(T0 + 4 * HOUR + 10_000, T0 + 5 * HOUR) == ["recent"]  # from the head
    reopened.close()
