"""Bucket aggregates: the one piece of arithmetic behind rollups, downsampling and rate.

A :class:`Frame` holds, per (series, bucket), the count, sum, min, max, first and last of the
non-NaN values and ``inc``, the reset-corrected increase between consecutive samples *inside*
the bucket. A raw sample is a frame row with count 1 and inc 0, so the same
:func:`regroup` turns samples into 1-minute rollups, 1-minute rollups into 1-hour ones, and
either into the steps of a query. Increase across a bucket boundary is not stored: it is
recomputed from the previous row's ``last`` and the next row's ``first`` (the cross term), which
is what makes rollup-based rates equal raw ones.

NaN values (including Prometheus staleness markers) carry no value and are left out, and so
are infinities: a bucket aggregate must be a number every database can store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store.types import Float64Array, Int64Array


@dataclass(slots=True)
class Frame:
    sid: Int64Array
    bucket: Int64Array  # bucket start, ms
    count: Int64Array
    sum: Float64Array
    min: Float64Array
    max: Float64Array
    first: Float64Array
    last: Float64Array
    inc: Float64Array

    def __len__(self) -> int:
        return len(self.sid)

    @classmethod
    def empty(cls) -> Frame:
        i = np.empty(0, np.int64)
        f = np.empty(0, np.float64)
        return cls(i, i, i, f, f, f, f, f, f)

    @classmethod
    def from_samples(cls, sid: Int64Array, ts: Int64Array, val: Float64Array) -> Frame:
        """One row per non-NaN sample (rows keep their own timestamp as bucket)."""
        keep = np.isfinite(val)
        sid, ts, val = sid[keep], ts[keep], val[keep]
        return cls(sid, ts, np.ones(len(sid), np.int64), val, val, val, val, val, np.zeros(len(sid)))

    @classmethod
    def concat(cls, frames: list[Frame], fields: tuple[str, ...] | None = None) -> Frame:
        """Rows of all frames in order; with ``fields``, only those columns are copied and
        the others are left as zeros (a query that needs two aggregates copies two)."""
        frames = [f for f in frames if len(f)]
        if not frames:
            return cls.empty()
        if len(frames) == 1:
            return frames[0]
        total = sum(len(f) for f in frames)
        columns = []
        for name in FIELDS:
            if fields is None or name in fields or name in ("sid", "bucket"):
                columns.append(np.concatenate([getattr(f, name) for f in frames]))
            else:
                columns.append(_zeros(total, name))
        return cls(*columns)

    def window(self, start: int, stop: int) -> Frame:
        """Rows [start, stop) as views, no copy."""
        return Frame(*(getattr(self, name)[start:stop] for name in FIELDS))

    def take(self, index: Int64Array | np.ndarray) -> Frame:
        return Frame(*(getattr(self, name)[index] for name in FIELDS))

    def sorted(self) -> Frame:
        return self.take(np.lexsort((self.bucket, self.sid)))


FIELDS = ("sid", "bucket", "count", "sum", "min", "max", "first", "last", "inc")


def _zeros(n: int, name: str) -> np.ndarray:
    """A read-only column of n zeros that costs no memory (a zero-stride view)."""
    return np.broadcast_to(np.zeros(1, np.int64 if name == "count" else np.float64), (n,))


def reset_delta(previous: Float64Array, current: Float64Array) -> Float64Array:
    """Counter increase from one value to the next; a drop means the counter restarted."""
    delta = current - previous
    return np.where(delta < 0, current, delta)


def regroup(rows: Frame, step_ms: int, origin_ms: int = 0, fields: tuple[str, ...] | None = None) -> Frame:
    """Combine rows (sorted by series, then time) into buckets of ``step_ms`` from ``origin_ms``.

    Rows before ``origin_ms`` land in negative buckets; callers fetch one step of lookback
    so the first real bucket gets its cross-boundary increase, then drop those buckets.
    With ``fields``, only those aggregates are computed (the rest come back as zeros).
    """
    if len(rows) == 0:
        return Frame.empty()
    wanted = set(FIELDS if fields is None else fields)
    sid = rows.sid
    bucket = origin_ms + np.floor_divide(rows.bucket - origin_ms, step_ms) * step_ms
    same_series = sid[1:] == sid[:-1]
    new_group = np.ones(len(rows), dtype=bool)
    new_group[1:] = ~same_series | (bucket[1:] != bucket[:-1])
    starts = np.flatnonzero(new_group)
    ends = np.append(starts[1:], len(rows)) - 1
    n = len(starts)

    def reduce(name: str, ufunc: np.ufunc) -> np.ndarray:
        if name not in wanted:
            return _zeros(n, name)
        reduced: np.ndarray = ufunc.reduceat(getattr(rows, name), starts)
        return reduced

    inc = np.zeros(n)
    if "inc" in wanted:
        # Cross term: increase from the previous row's last value to this row's first value.
        # The first row's cross term belongs to the boundary *into* its group, so it stays
        # out of the group's inside increase.
        cross = np.zeros(len(rows))
        cross[1:] = np.where(same_series, reset_delta(rows.last[:-1], rows.first[1:]), 0.0)
        inc = np.add.reduceat(rows.inc + cross, starts) - _first_cross(cross, starts)
    zeros = _zeros(n, "first")
    return Frame(
        sid=sid[starts],
        bucket=bucket[starts],
        count=reduce("count", np.add),
        sum=reduce("sum", np.add),
        min=reduce("min", np.minimum),
        max=reduce("max", np.maximum),
        first=rows.first[starts] if "first" in wanted else zeros,
        last=rows.last[ends] if "last" in wanted else zeros,
        inc=inc,
    )


def _first_cross(cross: Float64Array, starts: Int64Array) -> Float64Array:
    """Cross terms at group starts stay *outside* the stored ``inc`` of a bucket.

    ``inc`` is the increase inside a bucket only; the increase over the boundary into it is
    recomputed from neighbours whenever buckets are combined or read (see :func:`increases`).
    """
    return cross[starts]


def increases(frame: Frame) -> Float64Array:
    """Per row: inside increase plus the increase across the boundary from the previous row."""
    if len(frame) == 0:
        return np.zeros(0)
    cross = np.zeros(len(frame))
    same_series = frame.sid[1:] == frame.sid[:-1]
    cross[1:] = np.where(same_series, reset_delta(frame.last[:-1], frame.first[1:]), 0.0)
    return frame.inc + cross


def merge_rows(existing: Frame, new: Frame, resolution_ms: int) -> Frame:
    """Fold rows of the same buckets together (existing samples all precede new ones)."""
    return regroup(Frame.concat([existing, new]).sorted(), resolution_ms)
