"""Evaluates an expression at every step of a range query at once, node by node.

Each node yields a :class:`~promql.matrix.Matrix` (or a per-step scalar array) for all steps:
a selector is one search over its samples for every series and step, a range function reduces
every (series, step) window together, and aggregations and operators work on whole arrays.
Where the answer at a step depends on which rows are present at that step in a way arrays do
not express (``topk``, ``quantile``, ``count_values``, ambiguous vector matching, functions
rarely used in range queries), the node is computed step by step with the instant-query code
-- on its children's matrices where it can, or from scratch through :class:`EvalContext` --
so the two paths share one definition of PromQL.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from promql import aggregate as instant_aggregate
from promql import binary, calls, matrix_ops, windows
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
from promql.evaluate import (
    RANGE_FUNCS,
    TWO_SAMPLE_FUNCS,
    EvalContext,
    absent_labels,
    group_ratio,
    histogram_quantile,
    without_stale,
)
from promql.lexer import ExprError
from promql.matrix import Matrix, StepScalar, from_columns, per_step
from promql.range_funcs import Segments, holt_winters, linear_regression, quantile_over_time, stat_over_time
from promql.vector import Labels, Vector, drop_names
from store.flat_runs import starts_of
from store.types import Int64Array

Value = Matrix | StepScalar | str
_OVER_TIME = frozenset({"sum_over_time", "count_over_time", "avg_over_time", "min_over_time", "max_over_time",
                        "last_over_time", "present_over_time"})


DEFAULT_MAX_SAMPLES = 50_000_000  # Prometheus's --query.max-samples


class TooManySamples(ExprError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            "query processing would load too many samples into memory in query execution "
            f"(more than query.max_samples = {limit:,})", 0)


class MatrixEvaluator:
    """``times``: the steps (sorted ms); ``base``: the instant-query context over the same
    (preloaded) source, for the nodes computed step by step; ``max_samples``: the most
    samples, or values of a matrix (rows x steps), one node may hold."""

    def __init__(self, source: object, times: Int64Array, base: EvalContext,
                 max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
        self.source = source
        self.times = times
        self.base = base
        self.steps = len(times)
        self.max_samples = max_samples

    def _check_deadline(self) -> None:
        if self.base.deadline is not None:
            self.base.deadline()

    def _check_size(self, cells: int) -> None:
        if cells > self.max_samples:
            raise TooManySamples(self.max_samples)

    def evaluate(self, node: Node) -> Value:
        self._check_deadline()
        value = self._evaluate(node)
        if isinstance(value, Matrix):
            self._check_size(value.values.size)
        self._check_deadline()  # a node that ran past the deadline fails here, not later
        return value

    def _evaluate(self, node: Node) -> Value:
        if isinstance(node, NumberLiteral):
            return np.full(self.steps, node.value)
        if isinstance(node, StringLiteral):
            return node.value
        if isinstance(node, VectorSelector):
            if node.range_ms is not None:
                raise ExprError("a range vector cannot be the result; wrap it in rate(), avg_over_time(), ...", node.pos)
            return self._instant(node)[0]
        if isinstance(node, Unary):
            inner = self.evaluate(node.expr)
            if isinstance(inner, Matrix):
                return Matrix(drop_names(inner.labels), -inner.values, inner.present)
            return -_scalar(inner)
        if isinstance(node, Binary):
            return self._binary(node)
        if isinstance(node, Aggregate):
            return self._aggregate(node)
        if isinstance(node, Subquery):
            raise ExprError("a subquery cannot be the result; wrap it in max_over_time(), rate(), ...", node.pos)
        if isinstance(node, Call):
            return self._call(node)
        raise ExprError(f"cannot evaluate {type(node).__name__}", node.pos)

    # -- step by step -------------------------------------------------------------------------
    def _stepwise(self, node: Node) -> Value:
        """``node`` evaluated by the instant-query code at every step."""
        results = []
        for t in self.times.tolist():
            self._check_deadline()
            results.append(self.base.at(t).evaluate(node))
        if results and all(isinstance(r, (int, float)) for r in results):
            return np.asarray(results, np.float64)
        if any(isinstance(r, str) for r in results):
            return str(results[0])
        return from_columns([r if isinstance(r, Vector) else None for r in results], self.steps)

    def _columns(self, fn: Callable[[int], Vector | None]) -> Matrix:
        return per_step(fn, self.steps, self.base.deadline)

    # -- selection ----------------------------------------------------------------------------
    def _time(self, at: At) -> int:
        return self.base.start_ms if at == "start" else self.base.end_ms if at == "end" else int(at)  # type: ignore[arg-type]

    def _ends(self, at: At, offset_ms: int) -> Int64Array:
        if at is None:
            out: Int64Array = self.times - offset_ms
            return out
        return np.full(self.steps, self._time(at) - offset_ms, np.int64)

    def _instant(self, sel: VectorSelector) -> tuple[Matrix, Int64Array]:
        """The newest sample of each series at every step, and the sample's timestamps."""
        ends = self._ends(sel.at, sel.offset_ms)
        labels, idx, seg = self.source.newest_at(sel.name, sel.matchers, ends, self.base.lookback_ms)  # type: ignore[attr-defined]
        self._check_size(max(idx.size, len(seg.ts)))
        present = idx >= 0
        safe = np.where(present, idx, 0)
        values = seg.values[safe] if len(seg.values) else np.zeros(idx.shape)
        stamps = seg.ts[safe] if len(seg.ts) else np.zeros(idx.shape, np.int64)
        keep = np.flatnonzero(present.any(axis=1))
        if len(keep) == len(labels):
            return Matrix(labels, values, present), stamps
        return Matrix([labels[i] for i in keep.tolist()], values[keep], present[keep]), stamps[keep]

    def _windows(self, node: Node) -> tuple[list[Labels], windows.Windows]:
        """Every series' samples in ``[t - range, t]`` at every step: a range selector's
        (staleness markers left out) or a subquery's points."""
        if isinstance(node, Subquery):
            return self._subquery(node)
        assert isinstance(node, VectorSelector) and node.range_ms is not None
        ends = self._ends(node.at, node.offset_ms)
        starts = ends - node.range_ms
        fetched = self.source.fetch(node.name, node.matchers, int(starts.min()) - 1, int(ends.max()))  # type: ignore[attr-defined]
        self._check_size(max(len(fetched.seg.ts), len(fetched.labels) * self.steps))
        return fetched.labels, windows.Windows.of(without_stale(fetched.seg), starts, ends)

    def _subquery(self, node: Subquery) -> tuple[list[Labels], windows.Windows]:
        """The inner expression on the grid of absolute multiples of the subquery step that the
        windows cover (evaluated once for all steps), then windowed like samples."""
        ends = self._ends(node.at, node.offset_ms)
        starts = ends - node.range_ms
        step = node.step_ms or self.base.subquery_step_ms
        first = -(-int(starts.min()) // step) * step
        self._check_size((int(ends.max()) - first) // step + 1)
        grid = np.arange(first, int(ends.max()) + 1, step, dtype=np.int64)
        inner = (MatrixEvaluator(self.source, grid, self.base, self.max_samples).evaluate(node.expr)
                 if len(grid) else Matrix.empty(0))
        if not isinstance(inner, Matrix):
            inner = Matrix.empty(len(grid))
        rows, cols = np.nonzero(inner.present)
        counts = np.bincount(rows, minlength=len(inner)).astype(np.int64)
        seg = Segments(grid[cols], inner.values[rows, cols], starts_of(counts), counts)
        return inner.labels, windows.Windows.of(seg, starts, ends)

    # -- functions ----------------------------------------------------------------------------
    def _call(self, node: Call) -> Value:
        fn = node.func
        if fn == "time":
            return self.times / 1000.0
        if fn == "pi":
            return np.full(self.steps, math.pi)
        if fn in RANGE_FUNCS:
            return self._range_call(node)
        if fn == "timestamp":
            arg = node.args[0]
            if isinstance(arg, VectorSelector) and arg.range_ms is None:
                m, stamps = self._instant(arg)
                return Matrix(drop_names(m.labels), stamps / 1000.0, m.present)
            m = _matrix(self.evaluate(arg))
            return Matrix(drop_names(m.labels), np.broadcast_to(self.times / 1000.0, m.values.shape).copy(), m.present)
        if fn in ("label_replace", "label_join") or fn in calls.MATH_FUNCS or fn in (
            "clamp", "clamp_min", "clamp_max", "round", "sort", "sort_desc", "absent", "scalar", "vector",
            "histogram_quantile", "group_ratio",
        ):
            return self._instant_call(node, [self.evaluate(a) for a in node.args])
        return self._stepwise(node)

    def _instant_call(self, node: Call, args: list[Value]) -> Value:
        fn = node.func
        with np.errstate(all="ignore"):
            if fn in calls.MATH_FUNCS:
                m = _matrix(args[0])
                return Matrix(drop_names(m.labels), calls.MATH_FUNCS[fn](m.values), m.present)
            if fn in ("clamp_min", "clamp_max"):
                m, bound = _matrix(args[0]), _scalar(args[1])[None, :]
                clipped = np.maximum(m.values, bound) if fn == "clamp_min" else np.minimum(m.values, bound)
                return Matrix(drop_names(m.labels), clipped, m.present)
            if fn == "clamp":
                m, low, high = _matrix(args[0]), _scalar(args[1])[None, :], _scalar(args[2])[None, :]
                return Matrix(drop_names(m.labels), np.minimum(np.maximum(m.values, low), high), m.present & ~(high < low))
            if fn == "round":
                m = _matrix(args[0])
                inverse = 1.0 / (_scalar(args[1])[None, :] if len(args) > 1 else 1.0)
                return Matrix(drop_names(m.labels), np.floor(m.values * inverse + 0.5) / inverse, m.present)
        if fn in ("sort", "sort_desc"):
            return _matrix(args[0])  # a range query's result is ordered by labels
        if fn in ("label_replace", "label_join"):
            return self._relabel(node, _matrix(args[0]), [str(a) for a in args[1:]])
        if fn == "absent":
            m = _matrix(args[0])
            return _absent(node.args[0], np.asarray(m.present.any(axis=0), bool), self.steps)
        if fn == "scalar":
            m = _matrix(args[0])
            one = m.present.sum(axis=0) == 1
            total = np.where(m.present, m.values, 0.0).sum(axis=0) if len(m) else np.zeros(self.steps)
            return np.where(one, total, np.nan)
        if fn == "vector":
            return Matrix([()], _scalar(args[0])[None, :].copy(), np.ones((1, self.steps), bool))
        if fn == "histogram_quantile":
            q, m = _scalar(args[0]), _matrix(args[1])
            return self._columns(lambda k: histogram_quantile(float(q[k]), m.column(k)))
        m = _matrix(args[0])  # group_ratio
        by = [str(a) for a in args[1:]]
        return self._columns(lambda k: group_ratio(m.column(k), by))

    def _relabel(self, node: Call, m: Matrix, strings: list[str]) -> Matrix:
        def apply(vec: Vector) -> Vector:
            if node.func == "label_replace":
                dst, repl, src, regex = strings
                return calls.label_replace(vec, dst, repl, src, regex, node.pos)
            return calls.label_join(vec, strings[0], strings[1], strings[2:], node.pos)

        try:  # rows' labels rewritten once, unless two rows would collide: then step by step
            return m.with_labels(apply(Vector(m.labels, np.zeros(len(m)))).labels)
        except ExprError as exc:
            if "same labelset" not in exc.message:
                raise
        return self._columns(lambda k: apply(m.column(k)))

    def _range_call(self, node: Call) -> Matrix:
        fn = node.func
        range_arg = node.args[1] if fn == "quantile_over_time" else node.args[0]
        labels, w = self._windows(range_arg)
        scalars = [_scalar(self.evaluate(a)) for a in node.args if a is not range_arg]
        if fn == "absent_over_time":
            return _absent(range_arg, np.asarray((w.count > 0).any(axis=0), bool), self.steps)
        if fn in ("rate", "increase", "delta"):
            values, defined = windows.rate(w, is_counter=fn != "delta", is_rate=fn == "rate")
        elif fn == "irate":
            values, defined = windows.irate(w)
        elif fn in ("changes", "resets"):
            values, defined = windows.changes(w, resets_only=fn == "resets")
        elif fn in _OVER_TIME:
            values, defined = windows.over_time(fn, w)
        else:
            at_times = self._ends(range_arg.at if isinstance(range_arg, (VectorSelector, Subquery)) else None, 0)
            values, defined = windows.step_by_step(w, self._windowed(node, scalars, at_times),
                                                   2 if fn in TWO_SAMPLE_FUNCS else 1)
        # last_over_time acts like an offset and keeps the metric name (Prometheus 2.x)
        named = fn == "last_over_time" and isinstance(range_arg, VectorSelector)
        return _prune(Matrix(labels if named else drop_names(labels), values, defined))

    def _windowed(self, node: Call, scalars: list[StepScalar], at_times: Int64Array) -> Callable[[Segments, int], np.ndarray]:
        fn = node.func
        if fn == "deriv":
            return lambda seg, k: linear_regression(seg, seg.ts[seg.starts] if len(seg.ts) else seg.starts)[0]
        if fn == "predict_linear":
            def predict(seg: Segments, k: int) -> np.ndarray:
                slope, intercept = linear_regression(seg, np.full(len(seg.counts), int(at_times[k]), np.int64))
                out: np.ndarray = slope * float(scalars[0][k]) + intercept
                return out
            return predict
        if fn == "holt_winters":
            def smooth(seg: Segments, k: int) -> np.ndarray:
                sf, tf = float(scalars[0][k]), float(scalars[1][k])
                if not (0 < sf < 1) or not (0 < tf < 1):
                    raise ExprError(f"invalid smoothing or trend factor: expected 0 < sf, tf < 1, got {sf:g}, {tf:g}", node.pos)
                return holt_winters(seg, sf, tf)
            return smooth
        if fn == "quantile_over_time":
            return lambda seg, k: quantile_over_time(float(scalars[0][k]), seg)
        return lambda seg, k: stat_over_time(fn, seg)

    # -- operators ----------------------------------------------------------------------------
    def _binary(self, node: Binary) -> Value:
        lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
        if isinstance(lhs, str) or isinstance(rhs, str):
            raise ExprError(f"binary {node.op} needs numbers or vectors, not strings", node.pos)
        if node.op in ("and", "or", "unless"):
            return _prune(matrix_ops.set_operation(node, _matrix(lhs), _matrix(rhs)))
        if not isinstance(lhs, Matrix) or not isinstance(rhs, Matrix):
            out = matrix_ops.with_scalar(node, lhs, rhs)
            return _prune(out) if isinstance(out, Matrix) else out
        matched = matrix_ops.vector_match(node, lhs, rhs)
        if matched is not None:
            return _prune(matched)
        result = self._columns(lambda k: _vector(binary.apply(node, lhs.column(k), rhs.column(k))))
        return result

    def _aggregate(self, node: Aggregate) -> Value:
        param = self.evaluate(node.param) if node.param is not None else None
        inner = _matrix(self.evaluate(node.expr))
        native = matrix_ops.aggregate(node, inner)
        if native is not None:
            return _prune(native)

        def at_step(k: int) -> Vector:
            value = param if param is None or isinstance(param, str) else float(_scalar(param)[k])
            return instant_aggregate.apply(node, inner.column(k), value)

        return self._columns(at_step)


def _matrix(value: Value) -> Matrix:
    if not isinstance(value, Matrix):
        raise ExprError("expected an instant vector", 0)
    return value


def _scalar(value: Value) -> StepScalar:
    if isinstance(value, Matrix) or isinstance(value, str):
        raise ExprError("expected a scalar", 0)
    return value


def _vector(value: object) -> Vector:
    assert isinstance(value, Vector)
    return value


def _absent(node: Node, anything: np.ndarray, steps: int) -> Matrix:
    """absent()/absent_over_time(): one sample (1) at each step where nothing was there."""
    return Matrix([absent_labels(node)], np.ones((1, steps)), ~anything.reshape(1, steps))


def _prune(m: Matrix) -> Matrix:
    """Rows present at no step left out (they can appear nowhere in the result)."""
    live = m.present.any(axis=1)
    return m if live.all() else m.rows(np.flatnonzero(live))
