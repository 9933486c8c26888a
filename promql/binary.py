"""Binary operators with PromQL's semantics: arithmetic, comparisons (filter or ``bool``), set
operators, and vector matching (one-to-one, ``on``/``ignoring``, ``group_left``/``group_right``)."""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np

from promql.ast import Binary
from promql.lexer import ExprError
from promql.vector import NAME, Labels, Vector, drop, drop_name, drop_names, keep_only
from store.types import Float64Array

ARITH: dict[str, Callable[[Float64Array, Float64Array], Float64Array]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "%": np.fmod,
    "^": np.power,
}
COMPARE: dict[str, Callable[[Float64Array, Float64Array], np.ndarray]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}


def apply(node: Binary, lhs: Vector | float, rhs: Vector | float) -> Vector | float:
    with np.errstate(all="ignore"):
        if node.op in ("and", "or", "unless"):
            assert isinstance(lhs, Vector) and isinstance(rhs, Vector)
            return _set_op(node, lhs, rhs)
        if not isinstance(lhs, Vector) and not isinstance(rhs, Vector):
            return _scalars(node, float(lhs), float(rhs))
        if isinstance(lhs, Vector) and isinstance(rhs, Vector):
            return _vectors(node, lhs, rhs)
        return _vector_scalar(node, lhs, rhs)


def _scalars(node: Binary, a: float, b: float) -> float:
    x, y = np.asarray([a], np.float64), np.asarray([b], np.float64)
    if node.op in COMPARE:
        return float(bool(COMPARE[node.op](x, y)[0]))
    return float(ARITH[node.op](x, y)[0])


def _vector_scalar(node: Binary, lhs: Vector | float, rhs: Vector | float) -> Vector:
    vec = lhs if isinstance(lhs, Vector) else rhs
    assert isinstance(vec, Vector)
    n = len(vec.values)
    a = lhs.values if isinstance(lhs, Vector) else np.full(n, float(lhs))
    b = rhs.values if isinstance(rhs, Vector) else np.full(n, float(rhs))
    if node.op in COMPARE:
        hit = np.asarray(COMPARE[node.op](a, b), dtype=np.bool_)
        if node.return_bool:
            return Vector([drop_name(lab) for lab in vec.labels], hit.astype(np.float64))
        return vec.take(hit)
    return Vector([drop_name(lab) for lab in vec.labels], np.asarray(ARITH[node.op](a, b), np.float64))


def signature(labels: Labels, node: Binary) -> Labels:
    if not node.matching.on and not node.matching.labels:
        return drop_name(labels)  # the default: every label but the name
    if node.matching.on:
        return keep_only(labels, node.matching.labels)
    return drop(labels, node.matching.labels)


def _default_matching(node: Binary) -> bool:
    """One-to-one on every label but the name: no on(), ignoring() or group modifier."""
    m = node.matching
    return m.group is None and not m.on and not m.labels


def _aligned(node: Binary, lhs: Vector, rhs: Vector) -> list[Labels] | None:
    """The result labels when default matching pairs the two sides row by row: both sides list
    the same label sets (the name aside) in the same order, none twice. The common case of a
    rule (``used / (used + free)`` over series a scrape created side by side) then needs no
    signature dictionary; any other shape returns None and takes the general path."""
    if not _default_matching(node) or len(lhs.labels) != len(rhs.labels):
        return None
    left, right = drop_names(lhs.labels), drop_names(rhs.labels)
    if left is not right and left != right:
        return None
    return left if len(set(left)) == len(left) else None


def _vectors(node: Binary, lhs: Vector, rhs: Vector) -> Vector:
    aligned = _aligned(node, lhs, rhs)
    if aligned is not None:
        return _paired(node, lhs, rhs, aligned)
    group = node.matching.group
    one, many = (rhs, lhs) if group != "right" else (lhs, rhs)
    one_by_sig: dict[Labels, int] = {}
    for i, lab in enumerate(one.labels):
        sig = signature(lab, node)
        if sig in one_by_sig:
            side = "right" if one is rhs else "left"
            raise ExprError(
                f"many-to-many matching: several series on the {side} of {node.op} share the labels "
                f"{dict(sig)}; aggregate them or use on()/ignoring() with group_left/group_right",
                node.pos,
            )
        one_by_sig[sig] = i
    many_idx, one_idx, out_labels = [], [], []
    seen: set[Labels] = set()
    for i, lab in enumerate(many.labels):
        j = one_by_sig.get(signature(lab, node))
        if j is None:
            continue
        result = result_labels(node, lab, one.labels[j])
        if group is None:
            if result in seen:
                raise ExprError(f"several series on the left of {node.op} match one on the right; use group_left", node.pos)
            seen.add(result)
        many_idx.append(i)
        one_idx.append(j)
        out_labels.append(result)
    mi, oi = np.asarray(many_idx, np.int64), np.asarray(one_idx, np.int64)
    left_vals = (many if many is lhs else one).values[mi if many is lhs else oi]
    right_vals = (many if many is rhs else one).values[mi if many is rhs else oi]
    if node.op in COMPARE:
        hit = np.asarray(COMPARE[node.op](left_vals, right_vals), dtype=np.bool_)
        if node.return_bool:
            return Vector(out_labels, hit.astype(np.float64))
        keep = np.flatnonzero(hit)
        # A filtering comparison returns the left side's samples (its value, name included).
        lhs_rows = mi if many is lhs else oi
        return Vector([filter_labels(node, lhs.labels[k], out_labels[n]) for n, k in zip(keep.tolist(), lhs_rows[keep].tolist())], left_vals[keep])
    return Vector(out_labels, np.asarray(ARITH[node.op](left_vals, right_vals), np.float64))


def _paired(node: Binary, lhs: Vector, rhs: Vector, labels: list[Labels]) -> Vector:
    """Row i of ``lhs`` with row i of ``rhs`` (see :func:`_aligned`)."""
    if node.op in COMPARE:
        hit = np.asarray(COMPARE[node.op](lhs.values, rhs.values), dtype=np.bool_)
        if node.return_bool:
            return Vector(labels, hit.astype(np.float64))
        return lhs.take(hit)  # a filter keeps the left side's samples, name included
    return Vector(labels, np.asarray(ARITH[node.op](lhs.values, rhs.values), np.float64))


def result_labels(node: Binary, many_labels: Labels, one_labels: Labels) -> Labels:
    matching = node.matching
    if matching.group is None:
        if matching.on:
            base = keep_only(many_labels, matching.labels)
        else:
            base = drop(many_labels, matching.labels) if matching.labels else drop_name(many_labels)
    else:
        base = drop_name(many_labels)
        if matching.include:
            extra = dict(one_labels)
            merged = dict(base)
            for name in matching.include:
                if extra.get(name):
                    merged[name] = extra[name]
                else:
                    merged.pop(name, None)
            base = tuple(sorted(merged.items()))
    return base


def filter_labels(node: Binary, lhs_labels: Labels, matched: Labels) -> Labels:
    """A filtering comparison keeps the left side's labels, name included, except that a
    one-to-one on(...) keeps only the matched labels (and so loses the name) and ignoring(...)
    drops the ignored ones -- as Prometheus's resultMetric does."""
    matching = node.matching
    if matching.group is None:
        if matching.on:
            return keep_only(lhs_labels, matching.labels)
        ignored = set(matching.labels)
        return tuple(p for p in lhs_labels if p[0] not in ignored)
    name = [p for p in lhs_labels if p[0] == NAME]
    return tuple(sorted(name + list(matched)))


def _set_op(node: Binary, lhs: Vector, rhs: Vector) -> Vector:
    right_sigs = {signature(lab, node) for lab in rhs.labels}
    if node.op == "and":
        return lhs.take(np.asarray([signature(lab, node) in right_sigs for lab in lhs.labels], bool))
    if node.op == "unless":
        return lhs.take(np.asarray([signature(lab, node) not in right_sigs for lab in lhs.labels], bool))
    left_sigs = {signature(lab, node) for lab in lhs.labels}
    extra = rhs.take(np.asarray([signature(lab, node) not in left_sigs for lab in rhs.labels], bool))
    return Vector(lhs.labels + extra.labels, np.concatenate([lhs.values, extra.values]))
