"""Range queries with Prometheus's semantics: the expression is evaluated as an instant query at
every ``start + k * step`` up to and including ``end``, and the values of each label set form
one series of the matrix, sorted by labels.

Each selector's samples are read once for the whole range (the widest window the query needs)
and sliced per step in memory, so a 240-step query costs one store read per selector, not 240.
Subqueries share their inner evaluations between steps (their steps are absolute times).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from promql.evaluate import (
    DEFAULT_LOOKBACK_MS,
    DEFAULT_SUBQUERY_STEP_MS,
    EvalContext,
    Fetched,
    SampleSource,
)
from promql.lexer import ExprError
from promql.matrix import Series, to_series
from promql.matrix_eval import DEFAULT_MAX_SAMPLES, MatrixEvaluator
from promql.range_funcs import Segments
from promql.vector import Labels
from store.series_index import Matcher
from store.types import Float64Array, Int64Array, is_stale_marker

MAX_POINTS_PER_SERIES = 11_000  # Prometheus's limit on (end - start) / step


class QueryTimeout(Exception):
    """The query ran past its deadline."""


def deadline_after(seconds: float | None, clock: Callable[[], float] = time.monotonic) -> Callable[[], None] | None:
    """A check that raises :class:`QueryTimeout` once ``seconds`` have passed (None: no limit)."""
    if seconds is None:
        return None
    limit = clock() + seconds

    def check() -> None:
        if clock() > limit:
            raise QueryTimeout(f"query timed out after {seconds:g}s")

    return check


class _Window:
    """One selector's samples over [lo, hi], sliced per step."""

    def __init__(self, lo: int, hi: int, fetched: Fetched) -> None:
        self.lo, self.hi = lo, hi
        self.labels = fetched.labels
        seg = fetched.seg
        self.seg = seg
        owner = np.repeat(np.arange(len(seg.counts), dtype=np.int64), seg.counts)
        # one sorted key for every sample: series, then time -- one searchsorted finds every
        # series' slice at once
        self._base = lo - 1
        self._key = owner * (1 << 42) + (seg.ts - self._base)

    def newest(self, ends: Int64Array, lookback_ms: int) -> np.ndarray:
        """[series, end] -> index of the newest sample in [end - lookback, end], -1 when there
        is none or it is a staleness marker."""
        seg = self.seg
        n = len(seg.counts)
        ids = (np.arange(n, dtype=np.int64) * (1 << 42))[:, None]
        last = np.searchsorted(self._key, ids + (ends[None, :] - self._base), side="right") - 1
        own_start = seg.starts[:, None]
        ok = last >= own_start
        safe = np.where(ok, last, 0)
        if len(seg.ts):
            ok &= seg.ts[safe] >= (ends[None, :] - lookback_ms)
            ok &= ~is_stale_marker(seg.values[safe])
        else:
            ok &= False
        return np.where(ok, last, -1)

    def slice(self, start_ms: int, end_ms: int) -> Fetched:
        """Samples in (start, end], as :meth:`SampleSource.fetch` returns them."""
        seg = self.seg
        n = len(seg.counts)
        ids = np.arange(n, dtype=np.int64) * (1 << 42)
        lo = np.searchsorted(self._key, ids + (start_ms - self._base), side="right")
        hi = np.searchsorted(self._key, ids + (end_ms - self._base), side="right")
        counts = (hi - lo).astype(np.int64)
        starts = np.zeros(n, np.int64)
        if n > 1:
            np.cumsum(counts[:-1], out=starts[1:])
        total = int(counts.sum())
        gather = np.repeat(lo - starts, counts) + np.arange(total, dtype=np.int64)
        return Fetched(self.labels, Segments(seg.ts[gather], seg.values[gather], starts, counts))


class PreloadedSource:
    """Reads each selector once over the whole query and serves every step from memory.

    ``latest`` answers an instant selector for every step at once: the newest sample at or
    before each step time (one vectorised search over all series and steps), so a step costs
    a column lookup instead of a slice of every series."""

    def __init__(self, source: SampleSource, span_ms: int, step_ms: int = 0, horizon_ms: int | None = None) -> None:
        self.source = source
        self.span_ms = span_ms  # how far the later steps reach past the first
        self.step_ms = step_ms
        self.horizon_ms = horizon_ms  # reads reach past a request's end by span_ms, not past this
        self._windows: dict[tuple[str | None, tuple[Matcher, ...]], _Window] = {}
        self._latest: dict[tuple[object, ...], tuple[int, np.ndarray, _Window]] = {}

    def _window(self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int) -> _Window:
        key = (name, matchers)
        window = self._windows.get(key)
        if window is None or start_ms < window.lo or end_ms > window.hi:
            lo = start_ms if window is None else min(start_ms, window.lo)
            ahead = end_ms + self.span_ms if self.horizon_ms is None else max(end_ms, min(end_ms + self.span_ms, self.horizon_ms))
            hi = max(ahead, window.hi if window is not None else end_ms)
            window = self._windows[key] = _Window(lo, hi, self.source.fetch(name, matchers, lo, hi))
        return window

    def fetch(self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int) -> Fetched:
        return self._window(name, matchers, start_ms, end_ms).slice(start_ms, end_ms)

    def newest_at(
        self, name: str | None, matchers: tuple[Matcher, ...], ends: Int64Array, lookback_ms: int
    ) -> tuple[list[Labels], np.ndarray, Segments]:
        """[series, k] -> index into the segments' samples of each series' newest sample in
        [ends[k] - lookback, ends[k]] (-1: none, or a staleness marker), for every step at once."""
        window = self._window(name, matchers, int(ends.min()) - lookback_ms - 1, int(ends.max()))
        return window.labels, window.newest(ends, lookback_ms), window.seg

    def latest(
        self, name: str | None, matchers: tuple[Matcher, ...], end_ms: int, lookback_ms: int
    ) -> tuple[list[Labels], Float64Array, Int64Array] | None:
        """(labels, value, timestamp) of each series' newest sample in [end - lookback, end]
        that is not a staleness marker; None when this source has no step grid."""
        if self.step_ms <= 0:
            return None
        key = (name, matchers, lookback_ms, end_ms % self.step_ms)
        found = self._latest.get(key)
        if found is None or end_ms < found[0] or (end_ms - found[0]) // self.step_ms >= found[1].shape[1]:
            window = self._window(name, matchers, end_ms - lookback_ms - 1, end_ms + self.span_ms)
            ends = end_ms + np.arange(self.span_ms // self.step_ms + 1, dtype=np.int64) * self.step_ms
            found = self._latest[key] = (end_ms, window.newest(ends, lookback_ms), window)
        first, table, window = found
        column = table[:, (end_ms - first) // self.step_ms]
        if (column >= 0).all():  # every series answers: the same label list at every step
            return window.labels, window.seg.values[column], window.seg.ts[column]
        rows = np.flatnonzero(column >= 0)
        picked = column[rows]
        return [window.labels[i] for i in rows.tolist()], window.seg.values[picked], window.seg.ts[picked]


def check_resolution(start_ms: int, end_ms: int, step_ms: int) -> None:
    if step_ms <= 0:
        raise ExprError("zero or negative query resolution step widths are not accepted. Try a positive integer", 0)
    if end_ms < start_ms:
        raise ExprError("end timestamp must not be before start time", 0)
    if (end_ms - start_ms) // step_ms > MAX_POINTS_PER_SERIES:
        raise ExprError(
            f"exceeded maximum resolution of {MAX_POINTS_PER_SERIES:,} points per timeseries. "
            "Try decreasing the query resolution (?step=XX)", 0,
        )


def evaluate_range(
    node: object,
    source: SampleSource,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    *,
    lookback_ms: int = DEFAULT_LOOKBACK_MS,
    subquery_step_ms: int = DEFAULT_SUBQUERY_STEP_MS,
    deadline: Callable[[], None] | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
) -> list[Series]:
    """The matrix of ``node`` over [start, end] every ``step`` (a scalar expression gives one
    series without labels), every step evaluated at once (:mod:`promql.matrix_eval`). Raises
    ExprError for a string expression or a bad resolution."""
    from promql.ast import Node

    assert isinstance(node, Node)
    check_resolution(start_ms, end_ms, step_ms)
    preloaded = PreloadedSource(source, end_ms - start_ms, step_ms, horizon_ms=end_ms)
    base = EvalContext(preloaded, start_ms, lookback_ms, start_ms=start_ms, end_ms=end_ms,
                       subquery_step_ms=subquery_step_ms, deadline=deadline)
    times = np.arange(start_ms, end_ms + 1, step_ms, dtype=np.int64)
    value = MatrixEvaluator(preloaded, times, base, max_samples).evaluate(node)
    if isinstance(value, str):
        raise ExprError("a string expression cannot be evaluated over a range", node.pos)
    try:
        return to_series(value, times)
    except ExprError as exc:
        raise ExprError(exc.message, node.pos) from None
