"""Aggregation operators (sum, avg, min, max, count, stddev, quantile, topk, bottomk) over groups."""

from __future__ import annotations

import numpy as np

from promql.ast import Aggregate
from promql.lexer import ExprError
from promql.vector import Vector, group_index, grouping_keys


def apply(node: Aggregate, vec: Vector, param: object) -> Vector:
    if not len(vec):
        return Vector.empty()
    keys = grouping_keys(vec.labels, node.grouping, node.without)
    ids, groups = group_index(keys)
    n = len(groups)
    values = vec.values
    if node.op in ("topk", "bottomk"):
        return _top(node, vec, ids, param)
    if node.op == "quantile":
        q = float(param)  # type: ignore[arg-type]
        out = np.asarray([_quantile(q, values[ids == g]) for g in range(n)])
        return Vector(groups, out)
    present = ~np.isnan(values)
    counts = np.bincount(ids, minlength=n).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if node.op == "count":
            return Vector(groups, counts)
        if node.op == "sum":
            return Vector(groups, np.bincount(ids, weights=values, minlength=n).astype(np.float64))
        if node.op == "avg":
            return Vector(groups, np.bincount(ids, weights=values, minlength=n) / counts)
        if node.op in ("min", "max"):
            # NaN only wins when a group has nothing else, as in Prometheus.
            fill = np.inf if node.op == "min" else -np.inf
            out = np.full(n, fill)
            (np.minimum if node.op == "min" else np.maximum).at(out, ids[present], values[present])
            has = np.bincount(ids[present], minlength=n) > 0
            return Vector(groups, np.where(has, out, np.nan))
        if node.op == "stddev":
            mean = np.bincount(ids, weights=values, minlength=n) / counts
            var = np.bincount(ids, weights=(values - mean[ids]) ** 2, minlength=n) / counts
            return Vector(groups, np.sqrt(var))
    raise ExprError(f"aggregation {node.op} is not implemented", node.pos)


def _quantile(q: float, values: np.ndarray) -> float:
    if q < 0:
        return float("-inf")
    if q > 1:
        return float("inf")
    return float(np.quantile(values, q)) if len(values) else float("nan")


def _top(node: Aggregate, vec: Vector, ids: np.ndarray, param: object) -> Vector:
    k = int(float(param))  # type: ignore[arg-type]
    keep: list[int] = []
    for gid in np.unique(ids).tolist():
        members = np.flatnonzero(ids == gid)
        vals = vec.values[members]
        order = np.argsort(-vals if node.op == "topk" else vals, kind="stable")
        keep.extend(members[order[: max(k, 0)]].tolist())
    return vec.take(np.asarray(sorted(keep), np.int64))
