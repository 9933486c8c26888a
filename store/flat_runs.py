"""Index arithmetic on flat arrays cut into runs (one run per series or per chunk), so that
reads over tens of thousands of series need no per-series Python loop."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store.types import Float64Array, Int64Array


def starts_of(counts: Int64Array) -> Int64Array:
    """Where each run begins when runs of ``counts`` lie back to back."""
    out = np.zeros(len(counts), np.int64)
    if len(counts) > 1:
        np.cumsum(counts[:-1], out=out[1:])
    return out


def spread(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    """Every index of the runs ``[starts[i], starts[i] + lengths[i])``, run after run."""
    total = int(lengths.sum())
    return np.repeat(starts - starts_of(lengths), lengths) + np.arange(total, dtype=np.int64)


def range_breaks(sid: Int64Array, ts: Int64Array, range_ms: int) -> np.ndarray:
    """True where a run of one series and one ``range_ms`` stretch of time begins (``sid``
    sorted, ``ts`` in time order within each series): where chunks and rollup spans are cut."""
    window = ts // range_ms
    return np.append(True, (sid[1:] != sid[:-1]) | (window[1:] != window[:-1]))


@dataclass(slots=True)
class SeriesRuns:
    """Samples of several series, each series' samples one run in time order:
    ``run_sids[k]`` owns the next ``run_lengths[k]`` samples."""

    run_sids: Int64Array
    run_lengths: Int64Array
    ts: Int64Array
    values: Float64Array

    @classmethod
    def empty(cls) -> SeriesRuns:
        none = np.empty(0, np.int64)
        return cls(none, none, none, np.empty(0))

    @classmethod
    def of(cls, owner: Int64Array, ts: Int64Array, values: Float64Array) -> SeriesRuns:
        """From a per-sample owner column whose equal values are adjacent."""
        if not len(owner):
            return cls.empty()
        begins = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
        lengths = np.diff(np.append(begins, len(owner)))
        return cls(owner[begins], lengths.astype(np.int64), ts, values)

    def by_series(self) -> dict[int, tuple[Int64Array, Float64Array]]:
        out = {}
        for sid, a, n in zip(self.run_sids.tolist(), starts_of(self.run_lengths).tolist(), self.run_lengths.tolist()):
            out[sid] = (self.ts[a : a + n], self.values[a : a + n])
        return out


def segmented_cumsum(values: Int64Array, lengths: Int64Array) -> Int64Array:
    """Running sums restarting at every run (runs of ``lengths``, some possibly empty). Sums
    may wrap in int64 on the way; the per-run differences are still exact (modulo 2**64)."""
    return segmented_cumsum_inplace(values.copy(), starts_of(lengths)[lengths > 0])


def segmented_cumsum_inplace(values: Int64Array, starts: Int64Array) -> Int64Array:
    """:func:`segmented_cumsum` over ``values`` itself, runs beginning at ``starts`` (every run
    non-empty, the first at 0): no temporary as large as ``values`` (at tens of millions of
    samples, allocating one -- first-touch page faults -- costs more than the sums). Each run's
    first value is lowered by the previous run's total, so that one plain running sum restarts."""
    if len(values) == 0:
        return values
    with np.errstate(over="ignore"):
        totals = np.add.reduceat(values, starts)
        values[starts[1:]] -= totals[:-1]
        np.cumsum(values, out=values)
    return values


def segmented_xor(words: np.ndarray, lengths: Int64Array) -> np.ndarray:
    """Running XORs restarting at every run."""
    running: np.ndarray = np.bitwise_xor.accumulate(words)
    out: np.ndarray = running ^ np.repeat(_prefix_before(running, lengths), lengths)
    return out


def _prefix_before(running: np.ndarray, lengths: Int64Array) -> np.ndarray:
    """The running value just before each run starts (0 for a run at the very start)."""
    starts = starts_of(lengths)
    before = np.zeros(len(lengths), running.dtype)
    inner = starts > 0
    before[inner] = running[starts[inner] - 1]
    return before


def after_first(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    """Every index of each run but its first (runs of at least one)."""
    return spread(starts + 1, lengths - 1)


def gather_rows(buf: np.ndarray, at: Int64Array, width: int) -> np.ndarray:
    """``width`` bytes from each offset, as rows of a contiguous array."""
    return np.ascontiguousarray(buf[at[:, None] + np.arange(width, dtype=np.int64)])
