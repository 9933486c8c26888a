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
