"""Aggregations and binary operators on whole matrices (every step at once).

Only the cases whose result cannot depend on which rows are present at a step are done here;
the rest (``topk``, ``quantile``, ``count_values``, vector matching where one side's matching
labels repeat across rows) return None and are computed step by step with the instant-query
code, so both paths share one definition of PromQL's semantics.
"""

from __future__ import annotations

import numpy as np

from promql import binary
from promql.aggregate import _groups
from promql.ast import Aggregate, Binary
from promql.matrix import Matrix, StepScalar
from promql.vector import Labels, drop_names, group_index
from store.flat_runs import starts_of

NATIVE_AGGREGATIONS = frozenset({"sum", "avg", "count", "min", "max", "group", "stddev", "stdvar"})


def aggregate(node: Aggregate, m: Matrix) -> Matrix | None:
    if node.op not in NATIVE_AGGREGATIONS:
        return None
    if not len(m):
        return Matrix.empty(m.steps)
    ids, groups = _groups(m.labels, node.grouping, node.without)
    order = np.argsort(ids, kind="stable")
    begins = starts_of(np.bincount(ids, minlength=len(groups)))
    values, present = m.values[order], m.present[order]
    counts = np.add.reduceat(present.astype(np.int64), begins, axis=0)
    out_present = counts > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        if node.op == "count":
            out = counts.astype(np.float64)
        elif node.op == "group":
            out = np.ones(counts.shape)
        elif node.op in ("min", "max"):
            real = present & ~np.isnan(values)
            fill = np.inf if node.op == "min" else -np.inf
            reduced = (np.minimum if node.op == "min" else np.maximum).reduceat(np.where(real, values, fill), begins, axis=0)
            has_real = np.add.reduceat(real.astype(np.int64), begins, axis=0) > 0
            out = np.where(has_real, reduced, np.nan)  # NaN only wins when a group has nothing else
        else:
            sums = np.add.reduceat(np.where(present, values, 0.0), begins, axis=0)
            if node.op == "sum":
                out = sums
            elif node.op == "avg":
                out = sums / counts
            else:
                mean = (sums / counts)[ids[order]]
                squares = np.add.reduceat(np.where(present, (values - mean) ** 2, 0.0), begins, axis=0)
                var = squares / counts
                out = np.sqrt(var) if node.op == "stddev" else var
    return Matrix(list(groups), np.where(out_present, out, np.nan), out_present)


def with_scalar(node: Binary, lhs: Matrix | StepScalar, rhs: Matrix | StepScalar) -> Matrix | StepScalar:
    """Scalar-scalar or vector-scalar: element-wise at every step."""
    with np.errstate(all="ignore"):
        if not isinstance(lhs, Matrix) and not isinstance(rhs, Matrix):
            if node.op in binary.COMPARE:
                return np.asarray(binary.COMPARE[node.op](lhs, rhs), np.float64)
            return np.asarray(binary.ARITH[node.op](lhs, rhs), np.float64)
        m = lhs if isinstance(lhs, Matrix) else rhs
        assert isinstance(m, Matrix)
        a = lhs.values if isinstance(lhs, Matrix) else np.broadcast_to(lhs[None, :], m.values.shape)
        b = rhs.values if isinstance(rhs, Matrix) else np.broadcast_to(rhs[None, :], m.values.shape)
        if node.op in binary.COMPARE:
            hit = np.asarray(binary.COMPARE[node.op](a, b), bool)
            if node.return_bool:
                return Matrix(drop_names(m.labels), hit.astype(np.float64), m.present)
            return Matrix(m.labels, m.values, m.present & hit)
        return Matrix(drop_names(m.labels), np.asarray(binary.ARITH[node.op](a, b), np.float64), m.present)


def set_operation(node: Binary, lhs: Matrix, rhs: Matrix) -> Matrix:
    """``and``, ``or``, ``unless``: matched by signature at each step."""
    sig_l = [binary.signature(lab, node) for lab in lhs.labels]
    sig_r = [binary.signature(lab, node) for lab in rhs.labels]
    ids, keys = group_index(sig_l + sig_r)  # only the ids: no order or group bounds needed here
    ids_l, ids_r = ids[: len(sig_l)], ids[len(sig_l):]

    def presence(ids_side: np.ndarray, m: Matrix) -> np.ndarray:
        out = np.zeros((len(keys), m.steps), bool)
        if len(m):
            np.logical_or.at(out, ids_side, m.present)
        return out

    if node.op == "and":
        return Matrix(lhs.labels, lhs.values, lhs.present & presence(ids_r, rhs)[ids_l])
    if node.op == "unless":
        return Matrix(lhs.labels, lhs.values, lhs.present & ~presence(ids_r, rhs)[ids_l])
    extra = rhs.present & ~presence(ids_l, lhs)[ids_r]
    return Matrix(lhs.labels + rhs.labels, np.vstack([lhs.values, rhs.values]), np.vstack([lhs.present, extra]))


def vector_match(node: Binary, lhs: Matrix, rhs: Matrix) -> Matrix | None:
    """Arithmetic or comparison between two vectors when no step can see a matching conflict:
    the 'one' side's signatures are distinct across all its rows and, without group_left/right,
    so are the left side's. Otherwise None (decided step by step)."""
    group = node.matching.group
    one, many = (rhs, lhs) if group != "right" else (lhs, rhs)
    one_sigs = [binary.signature(lab, node) for lab in one.labels]
    one_by_sig = {sig: j for j, sig in enumerate(one_sigs)}
    if len(one_by_sig) != len(one_sigs):
        return None
    many_sigs = [binary.signature(lab, node) for lab in many.labels]
    if group is None and len(set(many_sigs)) != len(many_sigs):
        return None
    pairs = [(i, one_by_sig[sig]) for i, sig in enumerate(many_sigs) if sig in one_by_sig]
    mi = np.asarray([i for i, _ in pairs], np.int64)
    oi = np.asarray([j for _, j in pairs], np.int64)
    out_labels: list[Labels] = [binary.result_labels(node, many.labels[i], one.labels[j]) for i, j in pairs]
    present = many.present[mi] & one.present[oi]
    left_rows, right_rows = (mi, oi) if many is lhs else (oi, mi)
    a, b = lhs.values[left_rows], rhs.values[right_rows]
    with np.errstate(all="ignore"):
        if node.op in binary.COMPARE:
            hit = np.asarray(binary.COMPARE[node.op](a, b), bool)
            if node.return_bool:
                return Matrix(out_labels, hit.astype(np.float64), present)
            kept = [binary.filter_labels(node, lhs.labels[k], out) for k, out in zip(left_rows.tolist(), out_labels)]
            return Matrix(kept, a, present & hit)
        return Matrix(out_labels, np.asarray(binary.ARITH[node.op](a, b), np.float64), present)
