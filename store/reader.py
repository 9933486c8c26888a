"""Queries: instant, raw and stepped range queries over head, chunks and rollups.

For a stepped query the reader picks the coarsest rollup resolution that divides the step
(and whose retention reaches back far enough); it reads rollup rows for what is flushed and
raw head samples for the rest, then folds both into steps with :func:`store.rollup.regroup`.
Without a fitting rollup it decodes chunks. The two paths give the same numbers because both
go through the same fold (tests hold them to that).

Steps are aligned buckets ``[t, t + step)`` starting at ``floor(start / step) * step``; each
output point is stamped with its bucket start. One step before the first bucket is read too,
so the first ``increase``/``rate`` includes the increase across its left edge.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from store.chunk_reads import read_chunks
from store.flat_runs import spread, starts_of
from store.head import NEVER
from store.quantile import bucket_quantile, parse_le
from store.rollup import Frame, increases, regroup
from store.rollup_cache import split_by_series
from store.rollup_reads import NEEDS, batches, cached_rollups, fetch_rows, span_frame
from store.series_index import Selector
from store.tsdb import HeadSnapshot, TimeSeriesStore
from store.types import Float64Array, Int64Array, SeriesKey, is_stale_marker

log = logging.getLogger(__name__)
_SETTLE_TRIES = 3  # reads of head + rollups before one is served as it is (the 2nd and 3rd hold commits back)

Fn = Literal["last", "avg", "min", "max", "sum", "count", "rate", "increase"]
Combine = Literal["sum", "avg", "min", "max", "count"]
FNS: tuple[str, ...] = ("last", "avg", "min", "max", "sum", "count", "rate", "increase")
COMBINES: tuple[str, ...] = ("sum", "avg", "min", "max", "count")


@dataclass(frozen=True, slots=True)
class RangeQuery:
    selector: Selector
    start_ms: int
    end_ms: int
    step_ms: int
    fn: Fn = "avg"
    by: tuple[str, ...] | None = None  # None: one result per series
    combine: Combine = "sum"

    def __post_init__(self) -> None:
        if self.step_ms <= 0:
            raise ValueError("step must be positive")
        if self.end_ms < self.start_ms:
            raise ValueError("end is before start")
        if self.fn not in FNS:
            raise ValueError(f"unknown function {self.fn!r}; one of {', '.join(FNS)}")
        if self.combine not in COMBINES:
            raise ValueError(f"unknown aggregation {self.combine!r}; one of {', '.join(COMBINES)}")
        if (self.end_ms - self.start_ms) // self.step_ms > 100_000:
            raise ValueError("too many points: at most 100,000 steps per series")


@dataclass(slots=True)
class SeriesResult:
    labels: dict[str, str]
    ts_ms: Int64Array
    values: Float64Array
    source: str = field(default="raw")

    def points(self) -> list[tuple[int, float]]:
        return [(t, v) for t, v in zip(self.ts_ms.tolist(), self.values.tolist()) if v == v]


@dataclass(slots=True)
class RawSeries:
    key: SeriesKey
    ts_ms: Int64Array
    values: Float64Array


@dataclass(slots=True)
class FlatSamples:
    """Samples of several series in one set of arrays: series i (``found[i]``) owns
    ``ts[starts[i]:starts[i] + counts[i]]`` (staleness markers included)."""

    found: list[tuple[int, SeriesKey]]
    starts: Int64Array
    counts: Int64Array
    ts: Int64Array
    values: Float64Array


class Reader:
    def __init__(self, store: TimeSeriesStore) -> None:
        self.store = store

    # -- selection ---------------------------------------------------------------------------
    def select(self, selector: Selector) -> list[tuple[int, SeriesKey]]:
        return self.selection(selector)[0]

    def selection(self, selector: Selector) -> tuple[list[tuple[int, SeriesKey]], Int64Array]:
        """What ``selector`` matches and the ids as an array (see ``SeriesIndex.selection``)."""
        with self.store.lock:
            return self.store.index.selection(selector)

    # -- raw ---------------------------------------------------------------------------------
    def raw(self, selector: Selector, start_ms: int, end_ms: int) -> list[RawSeries]:
        """Every stored sample in [start, end] (staleness markers included)."""
        found, sids = self.selection(selector)
        if not found:
            return []
        snap = self.store.head_snapshot(sids, start_ms, end_ms)
        samples = self._samples(sids, snap, start_ms, end_ms)
        return [RawSeries(key, ts, val) for (_, key), (ts, val) in zip(found, samples)]

    def active(self, selector: Selector, start_ms: int, end_ms: int) -> list[tuple[int, SeriesKey]]:
        """The selected series with a sample in [start, end]: the head is counted, chunks are
        only looked up by their time bounds (nothing is decoded; for label and series lists)."""
        found, sids = self.selection(selector)
        if not found:
            return []
        win = self.store.head_window(sids, start_ms, end_ms)
        live = {int(s) for s, n in zip(sids.tolist(), win.counts.tolist()) if n > 0}
        older = [int(s) for s, h in zip(sids.tolist(), win.head_start.tolist()) if h > start_ms and int(s) not in live]
        p = self.store.backend.param
        for group in batches(older):
            rows = fetch_rows(self.store,
                f"SELECT DISTINCT series_id FROM chunks WHERE series_id IN ({', '.join([p] * len(group))}) "
                f"AND end_ms >= {p} AND start_ms <= {p}",
                (*group, start_ms, end_ms),
            )
            live.update(int(sid) for (sid,) in rows)
        return [(sid, key) for sid, key in found if sid in live]

    def raw_flat(self, selector: Selector, start_ms: int, end_ms: int) -> FlatSamples:
        """:meth:`raw` as flat arrays, without a per-series loop: the head's window and the
        decoded chunks below each series' ``head_start`` are interleaved by index arithmetic."""
        found, sids = self.selection(selector)
        if not found:
            empty = np.empty(0, np.int64)
            return FlatSamples([], empty, empty, empty, np.empty(0))
        win = self.store.head_window(sids, start_ms, end_ms)
        older = np.flatnonzero(win.head_start > start_ms)
        if len(older) == 0:
            return FlatSamples(found, win.starts, win.counts, win.ts, win.values)
        old = read_chunks(self.store, sids[older], win.head_start[older], start_ms, end_ms)
        # chunk samples first, then the head's from head_start on (a suffix of each row's window)
        row_of = {sid: i for i, sid in enumerate(sids.tolist())}
        old_rows = np.fromiter((row_of[s] for s in old.run_sids.tolist()), np.int64, len(old.run_sids))
        old_counts = np.zeros(len(sids), np.int64)
        old_counts[old_rows] = old.run_lengths
        head_owner = np.repeat(np.arange(len(sids), dtype=np.int64), win.counts)
        keep = win.ts >= win.head_start[head_owner]
        head_counts = np.bincount(head_owner[keep], minlength=len(sids)).astype(np.int64)
        counts = old_counts + head_counts
        starts = starts_of(counts)
        total = int(counts.sum())
        ts = np.empty(total, np.int64)
        values = np.empty(total, np.float64)
        old_at = spread(starts[old_rows], old.run_lengths)
        ts[old_at], values[old_at] = old.ts, old.values
        skipped = win.counts - head_counts  # the head samples a row leaves to its chunks
        head_at = spread(starts + old_counts, head_counts)
        kept = spread(win.starts + skipped, head_counts)
        ts[head_at], values[head_at] = win.ts[kept], win.values[kept]
        return FlatSamples(found, starts, counts, ts, values)

    def _samples(
        self, sids: Int64Array, snap: HeadSnapshot, start_ms: int, end_ms: int
    ) -> list[tuple[Int64Array, Float64Array]]:
        """Per series, its samples in [start, end]: chunks below ``head_start``, head from it."""
        old = read_chunks(self.store, sids, snap.head_start, start_ms, end_ms)
        chunk_data = old.by_series()
        out = []
        for i, sid in enumerate(sids.tolist()):
            old_ts, old_val = chunk_data.get(sid, (np.empty(0, np.int64), np.empty(0)))
            _, head_ts, head_val = snap.parts[i]
            from_head = head_ts >= snap.head_start[i]
            out.append((np.concatenate([old_ts, head_ts[from_head]]), np.concatenate([old_val, head_val[from_head]])))
        return out

    # -- instant -----------------------------------------------------------------------------
    def instant(
        self, selector: Selector, at_ms: int, lookback_ms: int = 300_000
    ) -> list[tuple[SeriesKey, int, float]]:
        """Newest sample of each series in (at - lookback, at]; stale series are left out."""
        out = []
        for series in self.raw(selector, at_ms - lookback_ms + 1, at_ms):
            if len(series.ts_ms) == 0:
                continue
            if is_stale_marker(series.values[-1:])[0]:
                continue
            out.append((series.key, int(series.ts_ms[-1]), float(series.values[-1])))
        return out

    # -- stepped range -----------------------------------------------------------------------
    def range(self, query: RangeQuery) -> list[SeriesResult]:
        found = self.select(query.selector)
        if not found:
            return []
        origin = query.start_ms // query.step_ms * query.step_ms
        frame, source = self._frame(found, origin - range_lookback(query), query.end_ms, query.step_ms, query.fn)
        return fold_range(query, found, frame, source)

    def _frame(
        self, found: list[tuple[int, SeriesKey]], start_ms: int, end_ms: int, step: int, fn: str = "avg"
    ) -> tuple[Frame, str]:
        sids = np.asarray([s for s, _ in found], np.int64)
        resolution = self._tier_for(step, start_ms)
        if resolution is None:
            snap = self.store.head_snapshot(sids, start_ms, end_ms)
            samples = self._samples(sids, snap, start_ms, end_ms)
            parts = [
                Frame.from_samples(np.full(len(ts), sid, np.int64), ts, val)
                for sid, (ts, val) in zip(sids.tolist(), samples)
            ]
            return Frame.concat(parts), "raw"
        sid_list = sids.tolist()
        # A checkpoint that commits rollup rows between the head's snapshot and their read
        # would have its samples counted twice (in the rows and in the head's tail): such a
        # read is tried again, holding the commits back (store.publish_gate).
        for attempt in range(_SETTLE_TRIES):
            with self.store.publish_gate.hold() if attempt else contextlib.nullcontext():
                snap = self.store.head_snapshot(sids, start_ms, end_ms)
                if self.store.rollup_cache.enabled:
                    per_series = cached_rollups(self.store, sid_list, resolution, start_ms, end_ms)
                else:
                    per_series = split_by_series(span_frame(self.store, sid_list, resolution, start_ms, end_ms),
                                                 sid_list)
                if self.store.publish_gate.settled(sids, snap.flushed_until):
                    break
        else:
            log.warning("rollup read of %d series overlapped checkpoint commits %d times; served as read",
                        len(sid_list), _SETTLE_TRIES)
        # Rollup rows only hold flushed samples (< flushed_until) and head tails only
        # unflushed ones, so the union is every sample exactly once; series by series, rows
        # then tail, keeps the (series, time) order without sorting.
        parts = []
        for i, sid in enumerate(sid_list):
            _, head_ts, head_val = snap.parts[i]
            take = head_ts >= snap.flushed_until[i]
            parts.append(per_series[sid])
            parts.append(Frame.from_samples(np.full(int(take.sum()), sid, np.int64), head_ts[take], head_val[take]))
        return Frame.concat(parts, NEEDS[fn]), f"rollup_{resolution // 1000}s"

    def _tier_for(self, step: int, start_ms: int) -> int | None:
        opts = self.store.options
        now = self.store.clock.now_ms()
        for resolution in sorted(opts.rollup_resolutions_ms, reverse=True):
            if step % resolution or start_ms % resolution:
                continue
            if start_ms < now - opts.rollup_retention_ms[resolution]:
                continue
            return resolution
        return None

    # -- histograms --------------------------------------------------------------------------
    def histogram_quantile(
        self,
        q: float,
        bucket_selector: Selector,
        start_ms: int,
        end_ms: int,
        step_ms: int,
        by: tuple[str, ...] = (),
    ) -> list[SeriesResult]:
        """Quantile q of a ``*_bucket`` histogram from the increase of its buckets per step."""
        return stepped_quantile(self.range, q, bucket_selector, start_ms, end_ms, step_ms, by)


def range_lookback(query: RangeQuery) -> int:
    """How far before the first bucket a range query reads: one step for increase and rate
    (for the increase across the left edge), nothing otherwise."""
    return query.step_ms if query.fn in ("increase", "rate") else 0


def fold_range(
    query: RangeQuery, found: list[tuple[int, SeriesKey]], frame: Frame, source: str
) -> list[SeriesResult]:
    """Folds the samples (or rollup rows) of the ``found`` series into the query's steps, then
    applies its function and grouping; every reader, local or remote, ends here."""
    step = query.step_ms
    origin = query.start_ms // step * step
    n_steps = (query.end_ms - origin) // step + 1
    stamps = origin + np.arange(n_steps, dtype=np.int64) * step
    folded = regroup(frame, step, origin, NEEDS[query.fn])
    values = _fn_values(folded, query.fn, step)
    keep = folded.bucket >= origin
    sids = np.asarray([sid for sid, _ in found], np.int64)
    row_of = np.zeros(int(sids.max()) + 1, np.int64)
    row_of[sids] = np.arange(len(sids))
    matrix = np.full((len(found), n_steps), np.nan)
    rows = row_of[folded.sid[keep]]
    cols = (folded.bucket[keep] - origin) // step
    if len(rows):
        matrix[rows, cols] = values[keep]
    if query.by is None:
        return [
            SeriesResult({"__name__": key.name, **key.labels_dict()}, stamps, matrix[i], source)
            for i, (_, key) in enumerate(found)
        ]
    return _combine(found, matrix, stamps, query.by, query.combine, source)


def stepped_quantile(
    range_of: Callable[[RangeQuery], list[SeriesResult]],
    q: float,
    bucket_selector: Selector,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    by: tuple[str, ...] = (),
) -> list[SeriesResult]:
    grouped = range_of(RangeQuery(bucket_selector, start_ms, end_ms, step_ms, "increase", (*by, "le"), "sum"))
    groups: dict[tuple[str, ...], list[SeriesResult]] = {}
    for result in grouped:
        if "le" not in result.labels:  # not a bucket series: ignored, as Prometheus's histogram_quantile does
            continue
        groups.setdefault(tuple(result.labels.get(label, "") for label in by), []).append(result)
    out = []
    for values, members in sorted(groups.items()):
        bounds = np.asarray([parse_le(m.labels["le"]) for m in members])
        counts = np.vstack([m.values for m in members])
        quantile = bucket_quantile(q, bounds, counts)
        out.append(SeriesResult(dict(zip(by, values)), members[0].ts_ms, quantile, members[0].source))
    return out


def _fn_values(frame: Frame, fn: str, step: int) -> Float64Array:
    with np.errstate(invalid="ignore", divide="ignore"):
        if fn == "avg":
            return frame.sum / frame.count
        if fn == "sum":
            return frame.sum.astype(np.float64)
        if fn == "min":
            return frame.min
        if fn == "max":
            return frame.max
        if fn == "count":
            return frame.count.astype(np.float64)
        if fn == "last":
            return frame.last
        inc = increases(frame)
        return inc if fn == "increase" else inc / (step / 1000.0)


def _combine(
    found: list[tuple[int, SeriesKey]],
    matrix: Float64Array,
    stamps: Int64Array,
    by: tuple[str, ...],
    how: str,
    source: str,
) -> list[SeriesResult]:
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, (_, key) in enumerate(found):
        groups.setdefault(tuple(key.get(label) for label in by), []).append(i)
    out = []
    for values, rows in sorted(groups.items()):
        block = matrix[rows]
        present = ~np.isnan(block)
        any_present = present.any(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            if how == "sum":
                agg = np.nansum(block, axis=0)
            elif how == "avg":
                agg = np.nansum(block, axis=0) / present.sum(axis=0)
            elif how == "min":
                agg = np.nanmin(np.where(present, block, np.inf), axis=0)
            elif how == "max":
                agg = np.nanmax(np.where(present, block, -np.inf), axis=0)
            else:
                agg = present.sum(axis=0).astype(np.float64)
        if how != "count":
            agg = np.where(any_present, agg, np.nan)
        labels = {k: v for k, v in zip(by, values) if v != ""}
        out.append(SeriesResult(labels, stamps, agg, source))
    return out


__all__ = ["Reader", "RangeQuery", "SeriesResult", "RawSeries", "NEVER", "fold_range", "range_lookback", "stepped_quantile"]
