"""Reading rollup rows: folded by the database, or from the in-memory rollup cache.

Split from :mod:`store.reader`, which decides *which* tier and path a query takes; this module
knows how rows of one tier are fetched and turned into :class:`~store.rollup.Frame` columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from store.rollup import Frame
from store.rollup_cache import split_by_series
from store.types import Int64Array

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore

IN_BATCH = 500  # series ids per IN (...) list

SQL_FOLDS = ("avg", "sum", "count", "min", "max")
ALL_COLUMNS = ("count", "sum", "min", "max", "first", "last", "inc")
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
SQL_FOLDS_OF = {"count": 'SUM("count")', "sum": 'SUM("sum")', "min": 'MIN("min")', "max": 'MAX("max")'}


def frame_from_rows(rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> Frame:
    """Rows of (series_id, bucket, *columns) into a Frame; columns not read stay zero."""
    table = np.asarray(rows, dtype=np.float64)
    n = len(rows)
    frame = Frame(
        table[:, 0].astype(np.int64),
        table[:, 1].astype(np.int64),
        np.zeros(n, np.int64),
        *(np.zeros(n) for _ in range(6)),
    )
    for i, name in enumerate(columns):
        values = table[:, 2 + i]
        setattr(frame, name, values.astype(np.int64) if name == "count" else values)
    return frame



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


def sql_folded_rollups(
    store: TimeSeriesStore, sids: Int64Array, resolution: int, start_ms: int, end_ms: int, step: int, fn: str
) -> Frame:
    """Rollup rows of ``sids`` with buckets in [start, end].

    For the aggregates SQL has (avg, sum, count, min, max) the database folds the rows
    into query steps itself, so only one row per output point crosses into Python; the
    others need consecutive rows (last value, increase across bucket edges) and fetch them.
    Only the columns the function needs are read.
    """
    p = store.backend.param
    fold_in_sql = fn in SQL_FOLDS and step > resolution
    columns = NEEDS[fn]
    frames = []
    for group in batches(sids.tolist()):
        marks = ", ".join([p] * len(group))
        where = (
            f"resolution_ms = {p} AND series_id IN ({marks}) AND bucket_ms >= {p} AND bucket_ms <= {p}"
        )
        if fold_in_sql:
            # start_ms is a multiple of step here, so the bucket arithmetic never meets
            # negative numbers (where SQLite and PostgreSQL round differently).
            select = ", ".join(SQL_FOLDS_OF[c] for c in columns)
            sql = (
                f"SELECT series_id, {p} + ((bucket_ms - {p}) / {p}) * {p} AS step_ms, {select} "
                f"FROM rollups WHERE {where} GROUP BY series_id, step_ms ORDER BY series_id, step_ms"
            )
            params: tuple[Any, ...] = (start_ms, start_ms, step, step, resolution, *group, start_ms, end_ms)
        else:
            quoted = ", ".join(f'"{c}"' for c in columns)
            sql = f"SELECT series_id, bucket_ms, {quoted} FROM rollups WHERE {where} ORDER BY series_id, bucket_ms"
            params = (resolution, *group, start_ms, end_ms)
        rows = fetch_rows(store, sql, params)
        if rows:
            frames.append(frame_from_rows(rows, columns))
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
        p = store.backend.param
        # A fill reads every row from start on. When the missing series' rows to now would not
        # fit half the cache, they would be evicted before they are read again (a ledger
        # walking a week hour by hour re-read the rest of the week every hour): read only the
        # window and keep nothing.
        to_now = (store.clock.now_ms() - start_ms) // resolution + 1
        fill = len(missing) * to_now <= cache.max_rows // 2
        until = "" if fill else f" AND bucket_ms <= {p}"
        loaded: list[Frame] = []
        for group in batches(missing):
            rows = fetch_rows(store,
                f'SELECT series_id, bucket_ms, "count", "sum", "min", "max", "first", "last", inc '
                f"FROM rollups WHERE resolution_ms = {p} AND series_id IN ({', '.join([p] * len(group))}) "
                f"AND bucket_ms >= {p}{until} ORDER BY series_id, bucket_ms",
                (resolution, *group, start_ms, *(() if fill else (end_ms,))),
            )
            if rows:
                loaded.append(frame_from_rows(rows, ALL_COLUMNS))
        fetched = split_by_series(Frame.concat(loaded), missing)
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
