"""Quantiles from cumulative histogram buckets, as Prometheus's histogram_quantile does them.

Within the bucket that holds the rank, the value is interpolated linearly between the
bucket's bounds; the lowest bucket starts at 0 (when its upper bound is positive); a rank
in the +Inf bucket answers the highest finite bound. Vectorised over the steps of a query.
"""

from __future__ import annotations

import numpy as np

from store.types import Float64Array


def parse_le(text: str) -> float:
    return float(text.replace("+Inf", "inf").replace("Inf", "inf"))


def bucket_quantile(q: float, upper_bounds: Float64Array, counts: Float64Array) -> Float64Array:
    """``counts[i, t]``: cumulative count of bucket ``upper_bounds[i]`` at step t."""
    steps = counts.shape[1] if counts.ndim == 2 else 0
    if q < 0:
        return np.full(steps, -np.inf)
    if q > 1:
        return np.full(steps, np.inf)
    order = np.argsort(upper_bounds)
    bounds = np.asarray(upper_bounds, np.float64)[order]
    counts = np.asarray(counts, np.float64)[order]
    out = np.full(steps, np.nan)
    if len(bounds) < 2 or not np.isposinf(bounds[-1]):
        return out
    # Rates of cumulative counters can come out slightly non-monotonic (scrapes are not
    # atomic); Prometheus forces monotonicity the same way.
    counts = np.fmax.accumulate(np.nan_to_num(counts, nan=0.0), axis=0)
    total = counts[-1]
    valid = total > 0
    rank = q * total
    # First bucket whose cumulative count reaches the rank.
    idx = np.argmax(counts >= rank[None, :], axis=0)
    cols = np.arange(steps)
    upper = bounds[idx]
    count_at = counts[idx, cols]
    prev_idx = np.maximum(idx - 1, 0)
    lower = np.where(idx == 0, 0.0, bounds[prev_idx])
    count_before = np.where(idx == 0, 0.0, counts[prev_idx, cols])
    in_bucket = count_at - count_before
    with np.errstate(invalid="ignore", divide="ignore"):
        value = lower + (upper - lower) * (rank - count_before) / in_bucket
    value = np.where(in_bucket > 0, value, upper)
    # Rank in the +Inf bucket: the highest finite bound.
    value = np.where(idx == len(bounds) - 1, bounds[-2], value)
    # A first bucket with a non-positive upper bound answers that bound.
    value = np.where((idx == 0) & (bounds[0] <= 0), bounds[0], value)
    out[valid] = value[valid]
    return out
