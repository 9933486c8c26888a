"""Time pieces of a packed head block: each series' samples cut where the block's time range is
cut, so that a read of a short window decodes only the pieces it overlaps.

Why: a packed block's series decode from their first sample (running sums), so a read of the
last five minutes decoded the whole block and cut its window after. Blocks packed from what
accumulated while nothing read the head (a load, a replay after a restart, rules that were
held back) spanned half an hour or more at 15 s scrapes: the default rule pack over 1,024 GPUs
decoded seven samples for every one it used and took 2.7x as long a cycle (68 ms against 25
before packing, at two hours of history). Cut into pieces of about ``PIECE_PER_SERIES``
samples a series, a read decodes at most one piece more than its window, as Prometheus's head
decodes at most one chunk (120 samples) more.

A piece of a series is a *run* of its own in the packed block: its first timestamp, first
delta and first value are kept apart like a series' (about 35 bytes a run), which is why a
piece holds a few dozen samples a series, not a handful. Blocks with fewer samples a series
than two pieces' worth are not cut: their runs are their series (``starts`` is None).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store.flat_runs import spread
from store.head_blocks import concat_offsets
from store.types import Int64Array

PIECE_PER_SERIES = 32  # samples a series in a piece, at least about (pieces cut the block's time evenly)
PIECE_MIN_MS = 5 * 60_000  # the least time a piece spans: the rules' usual window
MAX_PIECES = 64  # pieces a block is cut into at most (each adds a run's fields a series)
_AFTER_ALL = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class Pieces:
    """The runs of a packed block: ``offs`` over its samples, run after run; ``starts[i]`` the
    first run of series position ``i`` (with the total at the end), None when every series is
    one run."""

    offs: Int64Array
    starts: Int64Array | None

    @property
    def nbytes(self) -> int:
        return 0 if self.starts is None else self.offs.nbytes + self.starts.nbytes


def cut(offs: Int64Array, ts: Int64Array, min_ts: int, max_ts: int) -> Pieces:
    """Each series' samples (``offs`` over ``ts``, time order within each) cut at evenly spaced
    instants of [``min_ts``, ``max_ts``]: pieces of at least :data:`PIECE_MIN_MS` and about
    :data:`PIECE_PER_SERIES` samples a series or more. A block of a minute or two of fast
    scrapes (what the head packs at 100 k series a second) is not cut: a read of the usual
    window decodes all of it anyway, and each cut costs a run's fields a series."""
    series = len(offs) - 1
    span = max_ts - min_ts + 1
    pieces = min(MAX_PIECES, len(ts) // max(1, series * PIECE_PER_SERIES), span // PIECE_MIN_MS)
    if pieces < 2:
        return Pieces(offs, None)
    bounds = min_ts + (span * np.arange(1, pieces, dtype=np.int64)) // pieces
    piece = np.searchsorted(bounds, ts, side="right")
    begins = np.empty(len(ts), np.bool_)
    begins[0] = True
    np.not_equal(piece[1:], piece[:-1], out=begins[1:])
    series_starts = offs[:-1]
    begins[series_starts[series_starts < len(ts)]] = True
    run_starts = np.flatnonzero(begins)
    run_offs = np.append(run_starts, len(ts)).astype(np.int64)
    return Pieces(run_offs, np.searchsorted(run_starts, offs).astype(np.int64))


def runs_of(pieces: Pieces, k: Int64Array) -> tuple[Int64Array, Int64Array]:
    """The runs of the series at positions ``k``, series after series, and how many each has."""
    if pieces.starts is None:
        return k, np.ones(len(k), np.int64)
    first = pieces.starts[k]
    n = pieces.starts[k + 1] - first
    return spread(first, n), n


def overlapping(pieces: Pieces, first_ts: Int64Array, k: Int64Array, start_ms: int, end_ms: int) -> tuple[Int64Array, Int64Array]:
    """The runs of the series at positions ``k`` that may hold samples in [start, end] (the
    samples of a run come before the next run's first), and how many of them each series has.
    ``first_ts``: each run's first timestamp."""
    runs, n = runs_of(pieces, k)
    if pieces.starts is None or not len(runs):
        return runs, n
    last = np.zeros(len(runs), np.bool_)
    last[np.cumsum(n)[n > 0] - 1] = True  # a series' last run: nothing of it follows
    following = np.where(last, _AFTER_ALL, first_ts[np.minimum(runs + 1, len(first_ts) - 1)])
    keep = (first_ts[runs] <= end_ms) & (following > start_ms)
    owner = np.repeat(np.arange(len(k), dtype=np.int64), n)
    return runs[keep], np.bincount(owner[keep], minlength=len(k)).astype(np.int64)


def joined(parts: list[Pieces], series: list[int]) -> Pieces:
    """The runs of blocks of consecutive id ranges as one block's (each part has ``series[i]``
    series)."""
    if all(p.starts is None for p in parts):
        return Pieces(concat_offsets([p.offs for p in parts]), None)
    run_offs, starts = [], []
    samples = runs = 0
    for part, n in zip(parts, series):
        part_starts = np.arange(n + 1, dtype=np.int64) if part.starts is None else part.starts
        run_offs.append(part.offs[:-1] + samples)
        starts.append(part_starts[:-1] + runs)
        samples += int(part.offs[-1])
        runs += len(part.offs) - 1
    return Pieces(np.append(np.concatenate(run_offs), samples).astype(np.int64),
                  np.append(np.concatenate(starts), runs).astype(np.int64))
