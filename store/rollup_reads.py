"""Reading rollups: from their spans in the database, or from the in-memory rollup cache.

Split from :mod:`store.reader`, which decides *which* tier and path a query takes; this module
knows how rows of one tier are fetched and turned into :class:`~store.rollup.Frame` columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from store.rollup import Frame
from store.rollup_cache import split_by_series
from store.rollup_spans import frame_of_spans, in_buckets

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore

IN_BATCH = 500  # series ids per IN (...) list

# What each function reads from a folded frame ("last" and "increase" also need the columns
# behind the cross-bucket terms).
NEEDS: dict[str, tuple[str, ...]] = {
    "avg": ("count", "sum"),
    "sum": ("count", "sum"),
    "count": ("count",),
    "min": ("count", "min"),
    "max": ("count", "max"),
    "last": ("count", "last"),
    "increase": ("count", "first", "last", "inc"),
    "rate": ("count", "first", "last", "inc"),
}


def fetch_rows(store: TimeSeriesStore, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    conn = store.engine.raw_connection()
    try:
        cur = conn.cursor()
        cur.execute(sql, tuple(params))
        rows = cur.fetchall()
        cur.close()
        return [tuple(r) for r in rows]
    finally:
        conn.close()



def batches(items: Iterable[int]) -> Iterable[list[int]]:
    batch: list[int] = []
    for item in items:
        batch.append(item)
        if len(batch) == IN_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def span_frame(store: TimeSeriesStore, sids: list[int], resolution: int, start_ms: int, end_ms: int | None) -> Frame:
    """Rollup buckets of ``sids`` in [start, end] (no end: every bucket from start on), sorted
    by series and bucket, read from their spans (:mod:`store.rollup_spans`)."""
    p = store.backend.param
    until = "" if end_ms is None else f" AND first_ms <= {p}"
    frames = []
    for group in batches(sorted(sids)):  # sorted: the frames concatenate in series order
        rows = fetch_rows(
            store,
            f"SELECT series_id, first_ms, n, payload FROM rollup_spans WHERE resolution_ms = {p} "
            f"AND series_id IN ({', '.join([p] * len(group))}) AND last_ms >= {p}{until} "
            "ORDER BY series_id, first_ms",
            (resolution, *group, start_ms, *(() if end_ms is None else (end_ms,))),
        )
        if rows:
            frames.append(in_buckets(frame_of_spans(rows, resolution), start_ms, end_ms))
    return Frame.concat(frames)


def cached_rollups(store: TimeSeriesStore, sids: list[int], resolution: int, start_ms: int, end_ms: int) -> dict[int, Frame]:
    """Rows in [start, end] per series, from the rollup cache, filling it where it misses."""
    cache = store.rollup_cache
    found: dict[int, Frame] = {}
    with store.lock:
        epoch = store.flush_epoch
        for sid in sids:
            frame = cache.lookup(resolution, sid, start_ms)
            if frame is not None:
                found[sid] = frame
    missing = [sid for sid in sids if sid not in found]
    if missing:
        # A fill reads every row from start on. When the missing series' rows to now would not
        # fit half the cache, they would be evicted before they are read again (a ledger
        # walking a week hour by hour re-read the rest of the week every hour): read only the
        # window and keep nothing.
        to_now = (store.clock.now_ms() - start_ms) // resolution + 1
        fill = len(missing) * to_now <= cache.max_rows // 2
        loaded = span_frame(store, missing, resolution, start_ms, None if fill else end_ms)
        fetched = split_by_series(loaded, missing)
        with store.lock:
            keep = fill and store.flush_epoch == epoch
            for sid, frame in fetched.items():
                found[sid] = frame
                if keep:
                    cache.fill(resolution, sid, start_ms, frame)
    out = {}
    for sid in sids:
        frame = found[sid]
        a, b = np.searchsorted(frame.bucket, [start_ms, end_ms + 1])
        out[sid] = frame.window(int(a), int(b))
    return out
