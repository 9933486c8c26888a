"""Range-vector functions over all series at once: samples of every series concatenated, with
segment offsets, reduced with numpy (no per-series Python loop on the hot path).

``rate``/``increase``/``delta`` follow Prometheus's extrapolation so that the same rule fires at
the same moment here and in Prometheus: the sampled interval is stretched to the range edges
when the first/last sample lies within 1.1 × the average sample spacing of the edge (else by
half a spacing), and a counter is never extrapolated below zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store.types import Float64Array, Int64Array


@dataclass(slots=True)
class Segments:
    """Samples of n series: series i owns ``ts[starts[i]:starts[i] + counts[i]]``."""

    ts: Int64Array
    values: Float64Array
    starts: Int64Array
    counts: Int64Array

    @classmethod
    def of(cls, parts: list[tuple[Int64Array, Float64Array]]) -> Segments:
        counts = np.fromiter((len(t) for t, _ in parts), np.int64, len(parts))
        starts = np.zeros(len(parts), np.int64)
        if len(parts) > 1:
            np.cumsum(counts[:-1], out=starts[1:])
        ts = np.concatenate([t for t, _ in parts]) if parts else np.empty(0, np.int64)
        values = np.concatenate([v for _, v in parts]) if parts else np.empty(0)
        return cls(ts.astype(np.int64, copy=False), values.astype(np.float64, copy=False), starts, counts)

    @property
    def last_index(self) -> Int64Array:
        return self.starts + self.counts - 1


def _reduce(ufunc: np.ufunc, seg: Segments, values: Float64Array | None = None) -> Float64Array:
    """``ufunc.reduceat`` per segment; empty segments give NaN."""
    data = seg.values if values is None else values
    out = np.full(len(seg.counts), np.nan)
    nonempty = seg.counts > 0
    if nonempty.any():
        out[nonempty] = ufunc.reduceat(data, seg.starts[nonempty])
    return out


def over_time(fn: str, seg: Segments) -> Float64Array:
    if fn == "sum_over_time":
        return _reduce(np.add, seg)
    if fn == "count_over_time":
        return np.where(seg.counts > 0, seg.counts.astype(np.float64), np.nan)
    if fn == "avg_over_time":
        with np.errstate(invalid="ignore", divide="ignore"):
            return _reduce(np.add, seg) / seg.counts
    if fn == "min_over_time":  # NaN only when every sample is NaN, as in Prometheus
        return _reduce(np.fmin, seg)
    if fn == "max_over_time":
        return _reduce(np.fmax, seg)
    if fn == "last_over_time":
        out = np.full(len(seg.counts), np.nan)
        ok = seg.counts > 0
        out[ok] = seg.values[seg.last_index[ok]]
        return out
    raise ValueError(fn)


def _within_series_diffs(seg: Segments) -> tuple[Float64Array, Int64Array, Float64Array]:
    """Differences of consecutive samples inside one series, the series each belongs to, and
    the earlier sample of each pair."""
    same = np.ones(max(len(seg.values) - 1, 0), bool)
    boundaries = seg.starts[1:][seg.counts[1:] > 0] - 1  # the diff that crosses into a new series
    same[boundaries[(boundaries >= 0) & (boundaries < len(same))]] = False
    owner = np.repeat(np.arange(len(seg.counts)), seg.counts)[1:]
    return np.diff(seg.values)[same], owner[same], seg.values[:-1][same]


def changes(seg: Segments, resets_only: bool) -> Float64Array:
    diffs, owner, _ = _within_series_diffs(seg)
    hit = diffs < 0 if resets_only else diffs != 0
    out = np.bincount(owner[hit], minlength=len(seg.counts)).astype(np.float64)
    return np.where(seg.counts > 0, out, np.nan)


def extrapolated(seg: Segments, range_start_ms: int, range_end_ms: int, is_counter: bool, is_rate: bool) -> Float64Array:
    """Prometheus's extrapolatedRate for every series; NaN where a series has < 2 samples."""
    n = len(seg.counts)
    out = np.full(n, np.nan)
    ok = seg.counts >= 2
    if not ok.any():
        return out
    first_i, last_i = seg.starts[ok], seg.last_index[ok]
    correction = None
    if is_counter:
        diffs, owner, earlier = _within_series_diffs(seg)
        dropped = diffs < 0
        correction = np.bincount(owner[dropped], weights=earlier[dropped], minlength=n).astype(np.float64)[ok]
    out[ok] = extrapolate(
        Edges(seg.ts[first_i], seg.ts[last_i], seg.values[first_i], seg.values[last_i], seg.counts[ok]),
        correction, range_start_ms, range_end_ms, is_counter, is_rate,
    )
    return out


@dataclass(slots=True)
class Edges:
    """The first and last sample of each window (of two or more samples) and its sample count."""

    first_ts: Int64Array
    last_ts: Int64Array
    first_v: Float64Array
    last_v: Float64Array
    count: Int64Array


def extrapolate(
    edges: Edges,
    correction: Float64Array | None,
    range_start_ms: Int64Array | int,
    range_end_ms: Int64Array | int,
    is_counter: bool,
    is_rate: bool,
) -> Float64Array:
    """extrapolatedRate from each window's edges; ``correction``: for a counter, the values
    it had before each reset inside the window (added back, as the counter restarted at 0)."""
    first_t, last_t = edges.first_ts / 1000.0, edges.last_ts / 1000.0
    first_v = edges.first_v
    result = edges.last_v - first_v
    if correction is not None:
        result = result + correction
    sampled = last_t - first_t
    avg_gap = sampled / (edges.count - 1)
    to_start = first_t - np.asarray(range_start_ms) / 1000.0
    to_end = np.asarray(range_end_ms) / 1000.0 - last_t
    threshold = avg_gap * 1.1
    with np.errstate(invalid="ignore", divide="ignore"):
        if is_counter:
            to_zero = np.where((result > 0) & (first_v >= 0), sampled * (first_v / result), np.inf)
            to_start = np.where(to_zero < to_start, to_zero, to_start)
        start_ext = np.where(to_start < threshold, to_start, avg_gap / 2)
        end_ext = np.where(to_end < threshold, to_end, avg_gap / 2)
        factor = (sampled + start_ext + end_ext) / sampled
        result = result * factor
        if is_rate:
            result = result / ((np.asarray(range_end_ms) - np.asarray(range_start_ms)) / 1000.0)
    out: Float64Array = np.asarray(result, np.float64)
    return out


def irate(seg: Segments) -> Float64Array:
    out = np.full(len(seg.counts), np.nan)
    ok = seg.counts >= 2
    last, prev = seg.last_index[ok], seg.last_index[ok] - 1
    dv = seg.values[last] - seg.values[prev]
    dv = np.where(dv < 0, seg.values[last], dv)  # counter reset: the new value is the increase
    dt = (seg.ts[last] - seg.ts[prev]) / 1000.0
    with np.errstate(invalid="ignore", divide="ignore"):
        out[ok] = dv / dt
    return out


def owners(seg: Segments) -> Int64Array:
    """The series each sample belongs to."""
    return np.repeat(np.arange(len(seg.counts)), seg.counts)


def stat_over_time(fn: str, seg: Segments) -> Float64Array:
    """stddev_over_time / stdvar_over_time (population, as Prometheus), present_over_time."""
    n = len(seg.counts)
    if fn == "present_over_time":
        return np.where(seg.counts > 0, 1.0, np.nan)
    own = owners(seg)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(own, weights=seg.values, minlength=n) / seg.counts
        var = np.bincount(own, weights=(seg.values - mean[own]) ** 2, minlength=n) / seg.counts
    var = np.where(seg.counts > 0, var, np.nan)
    return np.sqrt(var) if fn == "stddev_over_time" else var


def quantile_over_time(q: float, seg: Segments) -> Float64Array:
    out = np.full(len(seg.counts), np.nan)
    for i in np.flatnonzero(seg.counts > 0).tolist():
        out[i] = quantile(q, seg.values[seg.starts[i] : seg.starts[i] + seg.counts[i]])
    return out


def quantile(q: float, values: Float64Array) -> float:
    """Prometheus's quantile: linear interpolation between the closest ranks; -Inf / +Inf
    outside [0, 1]."""
    if not len(values):
        return float("nan")
    if q < 0:
        return float("-inf")
    if q > 1:
        return float("inf")
    ordered = np.sort(values)
    rank = q * (len(ordered) - 1)
    lower = max(0, int(np.floor(rank)))
    upper = min(len(ordered) - 1, lower + 1)
    weight = rank - np.floor(rank)
    return float(ordered[lower] * (1 - weight) + ordered[upper] * weight)


def linear_regression(seg: Segments, intercept_ms: Int64Array) -> tuple[Float64Array, Float64Array]:
    """Least-squares slope (per second) and intercept at ``intercept_ms`` of every series with
    2+ samples; a constant series has slope 0 (Prometheus's special case)."""
    n = len(seg.counts)
    own = owners(seg)
    x = (seg.ts - intercept_ms[own]) / 1000.0
    y = seg.values
    cnt = seg.counts.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        sx = np.bincount(own, weights=x, minlength=n)
        sy = np.bincount(own, weights=y, minlength=n)
        sxy = np.bincount(own, weights=x * y, minlength=n)
        sx2 = np.bincount(own, weights=x * x, minlength=n)
        slope = (sxy - sx * sy / cnt) / (sx2 - sx * sx / cnt)
        intercept = sy / cnt - slope * sx / cnt
    first = np.where(seg.counts > 0, y[np.minimum(seg.starts, max(len(y) - 1, 0))] if len(y) else np.nan, np.nan)
    high = np.full(n, -np.inf)
    low = np.full(n, np.inf)
    if len(y):
        np.maximum.at(high, own, y)
        np.minimum.at(low, own, y)
    constant = (high == low) & np.isfinite(first)
    slope = np.where(constant, 0.0, slope)
    intercept = np.where(constant, first, intercept)
    few = seg.counts < 2
    return np.where(few, np.nan, slope), np.where(few, np.nan, intercept)


def holt_winters(seg: Segments, sf: float, tf: float) -> Float64Array:
    """Double exponential smoothing as Prometheus 2.x computes it (smoothing factor ``sf``,
    trend factor ``tf``, both in (0, 1))."""
    out = np.full(len(seg.counts), np.nan)
    for i in np.flatnonzero(seg.counts >= 2).tolist():
        v = seg.values[seg.starts[i] : seg.starts[i] + seg.counts[i]]
        s0, s1, b = 0.0, float(v[0]), float(v[1] - v[0])
        for k in range(1, len(v)):
            if k > 1:
                b = tf * (s1 - s0) + (1 - tf) * b
            s0, s1 = s1, sf * float(v[k]) + (1 - sf) * (s1 + b)
        out[i] = s1
    return out
