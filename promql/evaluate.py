"""Evaluates an expression tree at one instant over a :class:`SampleSource`.

One :class:`EvalContext` serves one evaluation cycle: every rule of the cycle evaluated at the
same time shares its fetches, so twenty rules over ``gpu_utilization_ratio`` read it once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from promql import aggregate, binary, calls
from promql.ast import (
    Aggregate,
    At,
    Binary,
    Call,
    Node,
    NumberLiteral,
    StringLiteral,
    Subquery,
    Unary,
    VectorSelector,
)
from promql.functions import CALENDAR
from promql.lexer import ExprError
from promql.range_funcs import (
    Segments,
    changes,
    extrapolated,
    holt_winters,
    irate,
    linear_regression,
    over_time,
    quantile_over_time,
    stat_over_time,
)
from promql.vector import NAME, Labels, Vector, drop_name, drop_names, group_index, keep_only
from store.quantile import bucket_quantile, parse_le
from store.series_index import Matcher
from store.types import is_stale_marker

Value = Vector | float | str
RANGE_FUNCS = frozenset({
    "rate", "increase", "delta", "irate", "changes", "resets", "deriv", "predict_linear", "holt_winters",
    "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time", "last_over_time",
    "quantile_over_time", "stddev_over_time", "stdvar_over_time", "present_over_time", "absent_over_time",
})
TWO_SAMPLE_FUNCS = frozenset({"rate", "increase", "delta", "irate", "deriv", "predict_linear", "holt_winters"})
DEFAULT_LOOKBACK_MS = 300_000  # an instant selector sees the newest sample up to 5 min old
DEFAULT_SUBQUERY_STEP_MS = 60_000


@dataclass(slots=True)
class Fetched:
    """Series matching a selector: ``labels[i]`` (with __name__) owns segment i of ``seg``."""

    labels: list[Labels]
    seg: Segments


class SampleSource(Protocol):
    def fetch(self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int) -> Fetched:
        """Every series matching, with its samples in (start, end] (staleness markers included)."""
        ...


def context_at(source: SampleSource, at_ms: int) -> EvalContext:
    """An evaluation context at ``at_ms`` over ``source``. A source that evaluates whole
    expressions itself (a remote engine, :mod:`remote.source`) makes its own through its
    ``context`` method; any other is read sample by sample here."""
    own = getattr(source, "context", None)
    return own(at_ms) if own is not None else EvalContext(source, at_ms)


class EvalContext:
    """``start_ms``/``end_ms``: the query's range (for ``@ start()`` / ``@ end()``; an instant
    query's are its time); ``subquery_step_ms``: the step of ``x[5m:]`` (Prometheus uses the
    global evaluation interval, 1 m by default); ``memo``: subquery results by (node, time),
    shared by the steps of one range query (subquery steps are absolute, so they repeat)."""

    def __init__(
        self,
        source: SampleSource,
        at_ms: int,
        lookback_ms: int = DEFAULT_LOOKBACK_MS,
        *,
        start_ms: int | None = None,
        end_ms: int | None = None,
        subquery_step_ms: int = DEFAULT_SUBQUERY_STEP_MS,
        memo: dict[tuple[int, int], Value] | None = None,
        deadline: Callable[[], None] | None = None,
    ) -> None:
        self.source = source
        self.at_ms = at_ms
        self.lookback_ms = lookback_ms
        self.start_ms = at_ms if start_ms is None else start_ms
        self.end_ms = at_ms if end_ms is None else end_ms
        self.subquery_step_ms = subquery_step_ms
        self.memo = memo if memo is not None else {}
        self.deadline = deadline
        self._fetched: dict[tuple[object, ...], Fetched] = {}

    def at(self, at_ms: int) -> EvalContext:
        """The same query at another instant (sharing the source and the subquery memo)."""
        return EvalContext(self.source, at_ms, self.lookback_ms, start_ms=self.start_ms, end_ms=self.end_ms,
                           subquery_step_ms=self.subquery_step_ms, memo=self.memo, deadline=self.deadline)

    def _time(self, at: At) -> int:
        if at is None:
            return self.at_ms
        if at == "start":
            return self.start_ms
        if at == "end":
            return self.end_ms
        return int(at)

    def evaluate(self, node: Node) -> Value:
        if isinstance(node, NumberLiteral):
            return node.value
        if isinstance(node, StringLiteral):
            return node.value
        if isinstance(node, VectorSelector):
            if node.range_ms is not None:
                raise ExprError("a range vector cannot be the result; wrap it in rate(), avg_over_time(), ...", node.pos)
            return self._instant(node)
        if isinstance(node, Unary):
            inner = self.evaluate(node.expr)
            if isinstance(inner, Vector):
                return Vector([drop_name(lab) for lab in inner.labels], -inner.values)
            return -float(inner)
        if isinstance(node, Binary):
            lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
            return binary.apply(node, lhs, rhs)  # type: ignore[arg-type]
        if isinstance(node, Aggregate):
            param = self.evaluate(node.param) if node.param is not None else None
            inner = self.evaluate(node.expr)
            assert isinstance(inner, Vector)
            return aggregate.apply(node, inner, param)
        if isinstance(node, Subquery):
            raise ExprError("a subquery cannot be the result; wrap it in max_over_time(), rate(), ...", node.pos)
        if isinstance(node, Call):
            return self._call(node)
        raise ExprError(f"cannot evaluate {type(node).__name__}", node.pos)

    # -- selection ---------------------------------------------------------------------------
    def _fetch(self, sel: VectorSelector, start_ms: int, end_ms: int) -> Fetched:
        key = (sel.name, sel.matchers, start_ms, end_ms)
        found = self._fetched.get(key)
        if found is None:
            found = self._fetched[key] = self.source.fetch(sel.name, sel.matchers, start_ms, end_ms)
        return found

    def _instant(self, sel: VectorSelector) -> Vector:
        return self._instant_samples(sel)[0]

    def _instant_samples(self, sel: VectorSelector) -> tuple[Vector, np.ndarray]:
        """The newest sample of each series in [t - lookback, t] (both ends included, as in
        Prometheus 2.x), and its timestamp."""
        end = self._time(sel.at) - sel.offset_ms
        latest = getattr(self.source, "latest", None)
        found = latest(sel.name, sel.matchers, end, self.lookback_ms) if latest is not None else None
        if found is not None:  # a range query's source answers every step at once
            labels, values, stamps = found
            return Vector(labels, values), stamps
        fetched = self._fetch(sel, end - self.lookback_ms - 1, end)
        seg = fetched.seg
        has = np.flatnonzero(seg.counts > 0)
        last = seg.last_index[has]
        values = seg.values[last]
        live = ~is_stale_marker(values)  # a series whose newest sample is a staleness marker is gone
        rows = has[live]
        # Every series live (the usual case): the fetched list itself, so that per-list memos
        # downstream (names dropped, aggregation groups) find it again next cycle.
        labels = fetched.labels if len(rows) == len(fetched.labels) else [fetched.labels[i] for i in rows.tolist()]
        return Vector(labels, values[live]), seg.ts[last[live]]

    def _range(self, node: Node) -> tuple[list[Labels], Segments, int, int]:
        """A range selector's samples in [t - range, t] (closed, as Prometheus 2.x), or a
        subquery's points."""
        if isinstance(node, Subquery):
            return self._subquery(node)
        assert isinstance(node, VectorSelector) and node.range_ms is not None
        end = self._time(node.at) - node.offset_ms
        start = end - node.range_ms
        fetched = self._fetch(node, start - 1, end)
        return fetched.labels, without_stale(fetched.seg), start, end

    def _subquery(self, node: Subquery) -> tuple[list[Labels], Segments, int, int]:
        """The inner expression at every multiple of the step in [t - range, t] (the steps are
        absolute, so the points of consecutive evaluations line up, as in Prometheus)."""
        end = self._time(node.at) - node.offset_ms
        start = end - node.range_ms
        step = node.step_ms or self.subquery_step_ms
        first = -(-start // step) * step
        points: dict[Labels, tuple[list[int], list[float]]] = {}
        for t in range(first, end + 1, step):
            if self.deadline is not None:
                self.deadline()
            key = (id(node), t)
            value = self.memo.get(key)
            if value is None:
                value = self.memo[key] = self.at(t).evaluate(node.expr)
            if isinstance(value, Vector):
                for series, v in zip(value.labels, value.values.tolist()):
                    ts, vs = points.setdefault(series, ([], []))
                    ts.append(t)
                    vs.append(v)
        found = list(points)
        seg = Segments.of([(np.asarray(points[lab][0], np.int64), np.asarray(points[lab][1], np.float64)) for lab in found])
        return found, seg, start, end

    # -- functions ---------------------------------------------------------------------------
    def _call(self, node: Call) -> Value:
        fn = node.func
        if fn == "time":
            return self.at_ms / 1000.0
        if fn == "pi":
            return math.pi
        if fn in RANGE_FUNCS:
            return self._range_call(node)
        if fn == "timestamp":
            return self._timestamp(node)
        args = [self.evaluate(a) for a in node.args]
        if fn == "histogram_quantile":
            assert isinstance(args[1], Vector)
            return histogram_quantile(float(args[0]), args[1])  # type: ignore[arg-type]
        if fn in calls.MATH_FUNCS:
            return calls.math_func(fn, _vec(args[0]))
        if fn in ("clamp_min", "clamp_max"):
            vec, bound = _vec(args[0]), float(args[1])  # type: ignore[arg-type]
            clipped = np.maximum(vec.values, bound) if fn == "clamp_min" else np.minimum(vec.values, bound)
            return Vector([drop_name(lab) for lab in vec.labels], clipped)
        if fn == "clamp":
            return calls.clamp(_vec(args[0]), float(args[1]), float(args[2]))  # type: ignore[arg-type]
        if fn == "round":
            return calls.round_to(_vec(args[0]), float(args[1]) if len(args) > 1 else 1.0)  # type: ignore[arg-type]
        if fn in ("sort", "sort_desc"):
            return calls.sort(_vec(args[0]), fn == "sort_desc")
        if fn == "label_replace":
            dst, repl, src, regex = (str(a) for a in args[1:])
            return calls.label_replace(_vec(args[0]), dst, repl, src, regex, node.pos)
        if fn == "label_join":
            return calls.label_join(_vec(args[0]), str(args[1]), str(args[2]), [str(a) for a in args[3:]], node.pos)
        if fn in CALENDAR:
            vec = _vec(args[0]) if args else Vector([()], np.asarray([self.at_ms / 1000.0]))
            return calls.calendar(fn, vec)
        if fn == "absent":
            if len(_vec(args[0])):
                return Vector.empty()
            return Vector([absent_labels(node.args[0])], np.ones(1))
        if fn == "scalar":
            vec = _vec(args[0])
            return float(vec.values[0]) if len(vec) == 1 else float("nan")
        if fn == "vector":
            return Vector([()], np.asarray([float(args[0])]))  # type: ignore[arg-type]
        if fn == "group_ratio":
            return group_ratio(_vec(args[0]), [str(a) for a in args[1:]])
        raise ExprError(f"function {fn} is not implemented", node.pos)

    def _range_call(self, node: Call) -> Vector:
        fn = node.func
        range_arg = node.args[1] if fn == "quantile_over_time" else node.args[0]
        labels, seg, start, end = self._range(range_arg)
        scalars = [float(self.evaluate(a)) for a in node.args if a is not range_arg]  # type: ignore[arg-type]
        if fn in ("rate", "increase", "delta"):
            values = extrapolated(seg, start, end, is_counter=fn != "delta", is_rate=fn == "rate")
        elif fn == "irate":
            values = irate(seg)
        elif fn in ("changes", "resets"):
            values = changes(seg, resets_only=fn == "resets")
        elif fn == "deriv":
            values = linear_regression(seg, seg.ts[seg.starts] if len(seg.ts) else seg.starts)[0]
        elif fn == "predict_linear":
            slope, intercept = linear_regression(seg, np.full(len(seg.counts), self._eval_time(range_arg), np.int64))
            values = slope * scalars[0] + intercept
        elif fn == "holt_winters":
            sf, tf = scalars
            if not (0 < sf < 1) or not (0 < tf < 1):
                raise ExprError(f"invalid smoothing or trend factor: expected 0 < sf, tf < 1, got {sf:g}, {tf:g}", node.pos)
            values = holt_winters(seg, sf, tf)
        elif fn == "quantile_over_time":
            values = quantile_over_time(scalars[0], seg)
        elif fn == "absent_over_time":
            if (seg.counts > 0).any():
                return Vector.empty()
            return Vector([absent_labels(range_arg)], np.ones(1))
        elif fn in ("stddev_over_time", "stdvar_over_time", "present_over_time"):
            values = stat_over_time(fn, seg)
        else:
            values = over_time(fn, seg)
        # a window with enough samples answers, even NaN (as Prometheus); an empty one does not
        keep = seg.counts >= (2 if fn in TWO_SAMPLE_FUNCS else 1)
        # last_over_time acts like an offset and keeps the metric name (Prometheus 2.x)
        named = fn == "last_over_time" and isinstance(range_arg, VectorSelector)
        out = labels if named else drop_names(labels)
        if keep.all():
            return Vector(out, values)
        return Vector([out[i] for i in np.flatnonzero(keep).tolist()], values[keep])

    def _eval_time(self, node: Node) -> int:
        """The time a range argument is evaluated at (predict_linear's intercept time)."""
        at = node.at if isinstance(node, (VectorSelector, Subquery)) else None
        return self._time(at)

    def _timestamp(self, node: Call) -> Vector:
        arg = node.args[0]
        if isinstance(arg, VectorSelector) and arg.range_ms is None:
            vec, ts = self._instant_samples(arg)
            return Vector([drop_name(lab) for lab in vec.labels], ts / 1000.0)
        vec = _vec(self.evaluate(arg))
        return Vector([drop_name(lab) for lab in vec.labels], np.full(len(vec), self.at_ms / 1000.0))


def absent_labels(node: Node) -> Labels:
    """absent()'s labels: the selector's equality matchers (a label matched twice is left out)."""
    sel = node.expr if isinstance(node, Subquery) else node
    if not isinstance(sel, VectorSelector):
        return ()
    equal: dict[str, str] = {}
    dup: set[str] = set()
    for m in sel.matchers:
        if m.op == "=" and m.label != NAME:
            if m.label in equal:
                dup.add(m.label)
            equal[m.label] = m.value
    return tuple(sorted((k, v) for k, v in equal.items() if k not in dup))


def without_stale(seg: Segments) -> Segments:
    """Range vectors leave staleness markers out (as Prometheus does)."""
    stale = is_stale_marker(seg.values)
    if not stale.any():
        return seg
    owner = np.repeat(np.arange(len(seg.counts)), seg.counts)
    keep = ~stale
    counts = np.bincount(owner[keep], minlength=len(seg.counts)).astype(np.int64)
    starts = np.zeros(len(counts), np.int64)
    if len(counts) > 1:
        np.cumsum(counts[:-1], out=starts[1:])
    return Segments(seg.ts[keep], seg.values[keep], starts, counts)


def _vec(value: Value) -> Vector:
    assert isinstance(value, Vector)
    return value


def histogram_quantile(q: float, buckets: Vector) -> Vector:
    """Group ``*_bucket`` elements by their labels other than ``le`` and interpolate.

    Groups with the same bucket bounds (every series of one histogram metric, as exporters
    write them) are interpolated together, one column each: a rule over a fleet's latency
    histograms is one numpy call per bucket layout, not one per series. (It was one per series,
    each scanning every element: quadratic, and a fifth of the process's CPU while scraping 100
    vLLM-shaped targets with the default rules.)"""
    les = [dict(lab).get("le") for lab in buckets.labels]
    kept = [i for i, le in enumerate(les) if le is not None]
    if not kept:
        return Vector([], np.empty(0, np.float64))
    keys = [tuple(p for p in drop_name(buckets.labels[i]) if p[0] != "le") for i in kept]
    ids, groups = group_index(keys)
    bounds = np.asarray([parse_le(les[i] or "") for i in kept], np.float64)  # or: for the type checker
    counts = np.asarray(buckets.values, np.float64)[kept]
    order = np.lexsort((bounds, ids))  # each group's buckets together, by bound
    ids, bounds, counts = ids[order], bounds[order], counts[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    by_layout: dict[bytes, list[int]] = {}
    for a, b in zip(starts.tolist(), ends.tolist()):
        by_layout.setdefault(bounds[a:b].tobytes(), []).append(a)
    values = np.full(len(groups), np.nan)
    for key, firsts in by_layout.items():
        layout = np.frombuffer(key, np.float64)
        at = np.asarray(firsts, np.int64)
        # counts[i, g]: bucket i of group g, the groups as the "steps" bucket_quantile takes
        values[ids[at]] = bucket_quantile(q, layout, counts[at[None, :] + np.arange(len(layout))[:, None]])
    keep = np.flatnonzero(~np.isnan(values))
    return Vector([groups[i] for i in keep.tolist()], values[keep])


def group_ratio(vec: Vector, by: list[str]) -> Vector:
    """Each value over the mean of its group (labels ``by``; the whole vector when empty)."""
    keys = [keep_only(lab, by) for lab in vec.labels]
    ids, groups = group_index(keys)
    finite = np.isfinite(vec.values)
    sums = np.bincount(ids[finite], weights=vec.values[finite], minlength=len(groups))
    counts = np.bincount(ids[finite], minlength=len(groups))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
        ratio = vec.values / means[ids]
    return Vector([drop_name(lab) for lab in vec.labels], ratio)


__all__ = ["EvalContext", "Fetched", "SampleSource", "Value", "NAME"]
