"""Range-vector functions at every step of a range query at once.

A range query asks ``rate(x[5m])`` at each of its steps: the window ``[t - 5m, t]`` of every
series at every step ``t``. The samples are read once; each window is a pair of indices into
them, found for all series and steps with one search, and the functions reduce the windows with
numpy (``reduceat`` over the index pairs, prefix counts, first/last lookups) instead of slicing
every series at every step. Functions with no closed form over index pairs (quantiles,
regressions, Holt-Winters, standard deviations) are computed step by step on the gathered
windows, with the same code an instant query uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from promql.range_funcs import Edges, Segments, extrapolate
from store.flat_runs import spread, starts_of
from store.types import Float64Array, Int64Array

_SHIFT = 42  # series number << 42 | time offset: one sorted key for (series, time), 139 years of ms


@dataclass(slots=True)
class Windows:
    """``seg``'s samples of series i in ``[range_start[k], range_end[k]]`` are
    ``seg.values[lo[i, k]:hi[i, k]]`` (series contiguous and in time order in ``seg``)."""

    seg: Segments
    lo: Int64Array
    hi: Int64Array
    range_start: Int64Array
    range_end: Int64Array

    @classmethod
    def of(cls, seg: Segments, range_start: Int64Array, range_end: Int64Array) -> Windows:
        n = len(seg.counts)
        base = int(min(range_start.min(), seg.ts.min() if len(seg.ts) else range_start.min())) - 1
        owner = np.repeat(np.arange(n, dtype=np.int64), seg.counts)
        key = (owner << _SHIFT) + (seg.ts - base)
        ids = (np.arange(n, dtype=np.int64) << _SHIFT)[:, None]
        lo = np.searchsorted(key, ids + (range_start - base)[None, :], side="left")
        hi = np.searchsorted(key, ids + (range_end - base)[None, :], side="right")
        return cls(seg, lo.astype(np.int64), hi.astype(np.int64), range_start, range_end)

    @property
    def count(self) -> Int64Array:
        out: Int64Array = self.hi - self.lo
        return out

    def reduce(self, ufunc: np.ufunc, data: np.ndarray, skip_first: bool = False) -> Float64Array:
        """``ufunc`` over each window of ``data`` (a per-sample column); NaN where a window is
        empty. ``skip_first``: leave each window's first sample out."""
        lo = np.minimum(self.lo + 1, len(data)) if skip_first else self.lo
        hi = np.maximum(self.hi, lo)
        pairs = np.stack([lo, hi], axis=-1).ravel()
        padded = np.append(data.astype(np.float64, copy=False), 0.0)  # an index may point one past the end
        out = np.full(self.lo.shape, np.nan)
        if len(pairs):
            reduced = ufunc.reduceat(padded, pairs)[::2].reshape(self.lo.shape)
            out = np.where(hi > lo, reduced, np.nan)
        return out

    def at_step(self, k: int) -> Segments:
        """Every series' window at step ``k`` as contiguous segments."""
        lo, counts = self.lo[:, k], self.count[:, k]
        gather = spread(lo, counts)
        return Segments(self.seg.ts[gather], self.seg.values[gather], starts_of(counts), counts)


def _series_start_mask(seg: Segments) -> np.ndarray:
    """True at every sample that is the first of its series."""
    first = np.zeros(len(seg.values), bool)
    first[seg.starts[seg.counts > 0]] = True
    return first


def _previous(seg: Segments) -> Float64Array:
    out = np.empty(len(seg.values))
    if len(out):
        out[0] = np.nan
        out[1:] = seg.values[:-1]
    return out


def over_time(fn: str, w: Windows) -> tuple[Float64Array, np.ndarray]:
    """(value, defined) of ``{sum,count,avg,min,max,last,present}_over_time`` at every window."""
    count = w.count
    defined = count > 0
    values = w.seg.values
    with np.errstate(invalid="ignore", divide="ignore"):
        if fn == "sum_over_time":
            out = w.reduce(np.add, values)
        elif fn == "count_over_time":
            out = count.astype(np.float64)
        elif fn == "avg_over_time":
            out = w.reduce(np.add, values) / count
        elif fn == "min_over_time":  # NaN only when every sample is NaN, as in Prometheus
            out = w.reduce(np.fmin, values)
        elif fn == "max_over_time":
            out = w.reduce(np.fmax, values)
        elif fn == "last_over_time":
            out = values[np.maximum(w.hi - 1, 0)] if len(values) else np.full(count.shape, np.nan)
        elif fn == "present_over_time":
            out = np.ones(count.shape)
        else:
            raise ValueError(fn)
    return out, defined


def rate(w: Windows, is_counter: bool, is_rate: bool) -> tuple[Float64Array, np.ndarray]:
    """``rate``/``increase``/``delta`` with Prometheus's extrapolation at every window."""
    ok = w.count >= 2
    out = np.full(w.lo.shape, np.nan)
    if not ok.any():
        return out, ok
    seg = w.seg
    first, last = w.lo[ok], w.hi[ok] - 1
    correction = None
    if is_counter:
        prev = _previous(seg)
        dropped = (seg.values < prev) & ~_series_start_mask(seg)
        correction = w.reduce(np.add, np.where(dropped, prev, 0.0), skip_first=True)
        correction = np.where(w.count >= 2, correction, 0.0)[ok]
    shape = w.lo.shape
    starts = np.broadcast_to(w.range_start[None, :], shape)[ok]
    ends = np.broadcast_to(w.range_end[None, :], shape)[ok]
    edges = Edges(seg.ts[first], seg.ts[last], seg.values[first], seg.values[last], w.count[ok])
    out[ok] = extrapolate(edges, correction, starts, ends, is_counter, is_rate)
    return out, ok


def irate(w: Windows) -> tuple[Float64Array, np.ndarray]:
    ok = w.count >= 2
    out = np.full(w.lo.shape, np.nan)
    last = w.hi[ok] - 1
    values, ts = w.seg.values, w.seg.ts
    dv = values[last] - values[last - 1]
    dv = np.where(dv < 0, values[last], dv)  # counter reset: the new value is the increase
    with np.errstate(invalid="ignore", divide="ignore"):
        out[ok] = dv / ((ts[last] - ts[last - 1]) / 1000.0)
    return out, ok


def changes(w: Windows, resets_only: bool) -> tuple[Float64Array, np.ndarray]:
    """Changes (resets) between consecutive samples inside each window."""
    seg = w.seg
    with np.errstate(invalid="ignore"):
        diffs = seg.values - _previous(seg)
        event = (diffs < 0) if resets_only else (diffs != 0)
    event &= ~_series_start_mask(seg)
    before = np.concatenate(([0], np.cumsum(event, dtype=np.int64)))  # events before index j
    lo_next = np.minimum(w.lo + 1, w.hi)
    counted = before[w.hi] - before[lo_next]
    defined = w.count > 0
    return np.where(defined, counted.astype(np.float64), np.nan), defined


def step_by_step(w: Windows, fn: Callable[[Segments, int], Float64Array], min_samples: int) -> tuple[Float64Array, np.ndarray]:
    """``fn(segments of step k, k)`` per step: for the functions without a closed form."""
    out = np.full(w.lo.shape, np.nan)
    for k in range(w.lo.shape[1]):
        out[:, k] = fn(w.at_step(k), k)
    return out, w.count >= min_samples
