"""Evaluates an expression tree at one instant over a :class:`SampleSource`.

One :class:`EvalContext` serves one evaluation cycle: every rule of the cycle evaluated at the
same time shares its fetches, so twenty rules over ``gpu_utilization_ratio`` read it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from promql import aggregate, binary
from promql.ast import Aggregate, Binary, Call, Node, NumberLiteral, StringLiteral, Unary, VectorSelector
from promql.lexer import ExprError
from promql.range_funcs import Segments, changes, extrapolated, irate, over_time
from promql.vector import NAME, Labels, Vector, drop_name, group_index, keep_only
from store.quantile import bucket_quantile, parse_le
from store.series_index import Matcher
from store.types import is_stale_marker

Value = Vector | float | str
DEFAULT_LOOKBACK_MS = 300_000  # an instant selector sees the newest sample up to 5 min old


@dataclass(slots=True)
class Fetched:
    """Series matching a selector: ``labels[i]`` (with __name__) owns segment i of ``seg``."""

    labels: list[Labels]
    seg: Segments


class SampleSource(Protocol):
    def fetch(self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int) -> Fetched:
        """Every series matching, with its samples in (start, end] (staleness markers included)."""
        ...


class EvalContext:
    def __init__(self, source: SampleSource, at_ms: int, lookback_ms: int = DEFAULT_LOOKBACK_MS) -> None:
        self.source = source
        self.at_ms = at_ms
        self.lookback_ms = lookback_ms
        self._fetched: dict[tuple[object, ...], Fetched] = {}

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
        end = self.at_ms - sel.offset_ms
        fetched = self._fetch(sel, end - self.lookback_ms, end)
        seg = fetched.seg
        has = np.flatnonzero(seg.counts > 0)
        last = seg.last_index[has]
        values = seg.values[last]
        live = ~is_stale_marker(values)  # a series whose newest sample is a staleness marker is gone
        rows = has[live]
        return Vector([fetched.labels[i] for i in rows.tolist()], values[live])

    def _range(self, sel: VectorSelector) -> tuple[list[Labels], Segments, int, int]:
        assert sel.range_ms is not None
        end = self.at_ms - sel.offset_ms
        start = end - sel.range_ms
        fetched = self._fetch(sel, start, end)
        return fetched.labels, _without_stale(fetched.seg), start, end

    # -- functions ---------------------------------------------------------------------------
    def _call(self, node: Call) -> Value:
        fn = node.func
        if fn == "time":
            return self.at_ms / 1000.0
        if fn in ("rate", "increase", "delta", "irate", "changes", "resets") or fn.endswith("_over_time"):
            sel = node.args[0]
            assert isinstance(sel, VectorSelector)
            labels, seg, start, end = self._range(sel)
            if fn in ("rate", "increase", "delta"):
                values = extrapolated(seg, start, end, is_counter=fn != "delta", is_rate=fn == "rate")
            elif fn == "irate":
                values = irate(seg)
            elif fn in ("changes", "resets"):
                values = changes(seg, resets_only=fn == "resets")
            else:
                values = over_time(fn, seg)
            keep = ~np.isnan(values)
            return Vector([drop_name(labels[i]) for i in np.flatnonzero(keep).tolist()], values[keep])
        args = [self.evaluate(a) for a in node.args]
        if fn == "histogram_quantile":
            assert isinstance(args[1], Vector)
            return histogram_quantile(float(args[0]), args[1])  # type: ignore[arg-type]
        if fn == "abs":
            vec = _vec(args[0])
            return Vector([drop_name(lab) for lab in vec.labels], np.abs(vec.values))
        if fn in ("clamp_min", "clamp_max"):
            vec, bound = _vec(args[0]), float(args[1])  # type: ignore[arg-type]
            clipped = np.maximum(vec.values, bound) if fn == "clamp_min" else np.minimum(vec.values, bound)
            return Vector([drop_name(lab) for lab in vec.labels], clipped)
        if fn == "absent":
            if len(_vec(args[0])):
                return Vector.empty()
            sel = node.args[0]
            fixed = tuple(sorted((m.label, m.value) for m in getattr(sel, "matchers", ()) if m.op == "="))
            return Vector([fixed], np.ones(1))
        if fn == "scalar":
            vec = _vec(args[0])
            return float(vec.values[0]) if len(vec) == 1 else float("nan")
        if fn == "vector":
            return Vector([()], np.asarray([float(args[0])]))  # type: ignore[arg-type]
        if fn == "group_ratio":
            return group_ratio(_vec(args[0]), [str(a) for a in args[1:]])
        raise ExprError(f"function {fn} is not implemented", node.pos)


def _without_stale(seg: Segments) -> Segments:
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
    """Group ``*_bucket`` elements by their labels other than ``le`` and interpolate."""
    keys = [tuple(p for p in drop_name(lab) if p[0] != "le") for lab in buckets.labels]
    les = [dict(lab).get("le") for lab in buckets.labels]
    ids, groups = group_index(keys)
    out_labels, out_values = [], []
    for gid, key in enumerate(groups):
        members = np.flatnonzero((ids == gid) & np.asarray([le is not None for le in les]))
        if len(members) == 0:
            continue
        bounds = np.asarray([parse_le(les[i] or "") for i in members.tolist()])
        counts = buckets.values[members].reshape(-1, 1)
        out_labels.append(key)
        out_values.append(bucket_quantile(q, bounds, counts)[0])
    values = np.asarray(out_values, np.float64)
    keep = ~np.isnan(values)
    return Vector([out_labels[i] for i in np.flatnonzero(keep).tolist()], values[keep])


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
