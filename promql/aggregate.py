"""Aggregation operators (sum, avg, min, max, count, group, stddev, stdvar, quantile, topk,
bottomk, count_values) over groups."""

from __future__ import annotations

import numpy as np

from promql.ast import Aggregate
from promql.identity_memo import IdentityMemo
from promql.lexer import ExprError
from promql.range_funcs import quantile
from promql.vector import Labels, Vector, group_index, grouping_keys
from store.types import LABEL_NAME_RE


def apply(node: Aggregate, vec: Vector, param: object) -> Vector:
    if not len(vec):
        return Vector.empty()
    ids, groups = _groups(vec.labels, node.grouping, node.without)
    n = len(groups)
    values = vec.values
    if node.op in ("topk", "bottomk"):
        return _top(node, vec, ids, param)
    if node.op == "count_values":
        return _count_values(node, vec, str(param))
    if node.op == "quantile":
        q = float(param)  # type: ignore[arg-type]
        out = np.asarray([quantile(q, values[ids == g]) for g in range(n)])
        return Vector(groups, out)
    present = ~np.isnan(values)
    counts = np.bincount(ids, minlength=n).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if node.op == "count":
            return Vector(groups, counts)
        if node.op == "group":
            return Vector(groups, np.ones(n))
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
        if node.op in ("stddev", "stdvar"):
            mean = np.bincount(ids, weights=values, minlength=n) / counts
            var = np.bincount(ids, weights=(values - mean[ids]) ** 2, minlength=n) / counts
            return Vector(groups, np.sqrt(var) if node.op == "stddev" else var)
    raise ExprError(f"aggregation {node.op} is not implemented", node.pos)


# A range query aggregates the same label list at every step: its groups are worked out once.
_GROUPS: IdentityMemo[tuple[np.ndarray, list[Labels]]] = IdentityMemo(64)


def _groups(labels: list[Labels], grouping: tuple[str, ...], without: bool) -> tuple[np.ndarray, list[Labels]]:
    if not grouping and not without:  # one group of everything
        return np.zeros(len(labels), np.int64), [()]
    found = _GROUPS.get(labels, grouping, without)
    if found is not None:
        return found
    return _GROUPS.put(labels, group_index(grouping_keys(labels, grouping, without)), grouping, without)


def _top(node: Aggregate, vec: Vector, ids: np.ndarray, param: object) -> Vector:
    """The k largest (smallest) of each group, largest (smallest) first, groups in the order
    they first appear; NaN ranks last; ties keep the input order."""
    k = int(float(param))  # type: ignore[arg-type]
    keep: list[int] = []
    for gid in dict.fromkeys(ids.tolist()):
        members = np.flatnonzero(ids == gid)
        vals = vec.values[members]
        key = np.where(np.isnan(vals), np.inf, -vals if node.op == "topk" else vals)
        order = np.argsort(key, kind="stable")
        keep.extend(members[order[: max(k, 0)]].tolist())
    return vec.take(np.asarray(keep, np.int64))


def _count_values(node: Aggregate, vec: Vector, label: str) -> Vector:
    if not LABEL_NAME_RE.fullmatch(label):
        raise ExprError(f"invalid label name {label!r} for count_values", node.pos)
    counted: dict[Labels, int] = {}
    keys = grouping_keys(vec.labels, node.grouping, node.without)
    for key, value in zip(keys, vec.values.tolist()):
        out = tuple(sorted({**dict(key), label: format_value(value)}.items()))
        counted[out] = counted.get(out, 0) + 1
    return Vector(list(counted), np.asarray(list(counted.values()), np.float64))


def format_value(value: float) -> str:
    """A float as Go's strconv.FormatFloat(v, 'f', -1, 64) writes it."""
    text = repr(value)
    if "e" not in text and "n" not in text:  # the common case: repr is already positional
        return text[:-2] if text.endswith(".0") else text
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return np.format_float_positional(value, unique=True, trim="-")
