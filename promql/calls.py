"""Instant-vector functions of PromQL 2.x: label rewriting, rounding and clamping, sorting,
element-wise math and the calendar functions, with Prometheus's edge cases (every function but
``label_*``, ``sort*`` and ``timestamp`` of a selector drops the metric name)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from promql.identity_memo import IdentityMemo
from promql.lexer import ExprError
from promql.vector import NAME, Labels, Vector, drop_name
from store.regex import RegexError, label_regex
from store.types import Float64Array

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

MATH_FUNCS: dict[str, Callable[[Float64Array], Float64Array]] = {
    "abs": np.abs, "ceil": np.ceil, "floor": np.floor, "exp": np.exp, "ln": np.log, "log2": np.log2,
    "log10": np.log10, "sqrt": np.sqrt, "sgn": np.sign, "acos": np.arccos, "acosh": np.arccosh,
    "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan, "atanh": np.arctanh, "cos": np.cos,
    "cosh": np.cosh, "sin": np.sin, "sinh": np.sinh, "tan": np.tan, "tanh": np.tanh, "deg": np.degrees,
    "rad": np.radians,
}


def math_func(name: str, vec: Vector) -> Vector:
    with np.errstate(all="ignore"):
        return Vector([drop_name(lab) for lab in vec.labels], MATH_FUNCS[name](vec.values))


def round_to(vec: Vector, to_nearest: float) -> Vector:
    """Round half up to a multiple of ``to_nearest`` (Prometheus: floor(v / n + 0.5) * n)."""
    with np.errstate(all="ignore"):
        inverse = 1.0 / to_nearest
        values = np.floor(vec.values * inverse + 0.5) / inverse
    return Vector([drop_name(lab) for lab in vec.labels], values)


def clamp(vec: Vector, low: float, high: float) -> Vector:
    if high < low:
        return Vector.empty()
    return Vector([drop_name(lab) for lab in vec.labels], np.minimum(np.maximum(vec.values, low), high))


def sort(vec: Vector, descending: bool) -> Vector:
    """NaN sorts last either way (as Prometheus's vectorByValueHeap / reverse)."""
    nan = np.isnan(vec.values)
    key = np.where(nan, np.inf, -vec.values if descending else vec.values)
    order = np.lexsort((nan, key))
    return vec.take(order.astype(np.int64))


def _set_label(labels: Labels, name: str, value: str) -> Labels:
    out = dict(labels)
    if value:
        out[name] = value
    else:
        out.pop(name, None)
    return tuple(sorted(out.items()))


def label_replace(vec: Vector, dst: str, replacement: str, src: str, regex: str, pos: int) -> Vector:
    try:
        # RE2, as Prometheus: linear time, no backreferences; compiled once per pattern, not per step
        pattern = label_regex(regex).compiled
    except RegexError as exc:
        raise ExprError(f"invalid regular expression in label_replace(): {regex}: {exc}", pos) from None
    if not _LABEL_NAME.match(dst):
        raise ExprError(f"invalid destination label name in label_replace(): {dst}", pos)
    rule = (dst, replacement, src, regex)
    same = _REPLACED_LISTS.get(vec.labels, rule)  # the same list at every step of a range query
    if same is not None:
        return Vector(same, vec.values)
    out = []
    for labels in vec.labels:
        # a range query rewrites the same series at every step: once per label tuple
        new = _REPLACED.get(labels, rule)
        if new is None:
            match = pattern.fullmatch(dict(labels).get(src, ""))
            new = _REPLACED.put(labels, _set_label(labels, dst, _expand(match, replacement)) if match else labels, rule)
        out.append(new)
    _check_unique(out, pos)
    return Vector(_REPLACED_LISTS.put(vec.labels, out, rule), vec.values)


_REPLACED: IdentityMemo[Labels] = IdentityMemo(500_000)  # label_replace's results per tuple and rewrite
_REPLACED_LISTS: IdentityMemo[list[Labels]] = IdentityMemo(256)  # ... and per list of tuples


def label_join(vec: Vector, dst: str, sep: str, srcs: list[str], pos: int) -> Vector:
    if not _LABEL_NAME.match(dst):
        raise ExprError(f"invalid destination label name in label_join(): {dst}", pos)
    out = []
    for labels in vec.labels:
        have = dict(labels)
        out.append(_set_label(labels, dst, sep.join(have.get(s, "") for s in srcs)))
    _check_unique(out, pos)
    return Vector(out, vec.values)


def _expand(match: Any, replacement: str) -> str:
    """Go's regexp Expand: $1, ${1}, $name, ${name}; $$ is a dollar; a group that does not
    exist or did not take part expands to ""."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(2)
        try:
            value = match.group(int(name)) if name.isdigit() else match.group(name)
        except IndexError:
            return ""
        return value or ""

    return re.sub(r"\$\$|\$\{([A-Za-z0-9_]+)\}|\$([A-Za-z0-9_]+)", one, replacement)


def _check_unique(labels: list[Labels], pos: int) -> None:
    if len(set(labels)) != len(labels):
        raise ExprError("vector cannot contain metrics with the same labelset", pos)


def calendar(name: str, vec: Vector) -> Vector:
    """day_of_week & co. of each value taken as unix seconds (UTC)."""
    out = np.full(len(vec.values), np.nan)
    for i, v in enumerate(vec.values.tolist()):
        if not math.isfinite(v):
            continue
        when = datetime.fromtimestamp(v, UTC)
        out[i] = {
            "day_of_month": when.day,
            "day_of_week": when.isoweekday() % 7,
            "day_of_year": when.timetuple().tm_yday,
            "days_in_month": _days_in_month(when),
            "hour": when.hour,
            "minute": when.minute,
            "month": when.month,
            "year": when.year,
        }[name]
    return Vector([drop_name(lab) for lab in vec.labels], out)


def _days_in_month(when: datetime) -> int:
    nxt = when.replace(year=when.year + 1, month=1, day=1) if when.month == 12 else when.replace(month=when.month + 1, day=1)
    return (nxt - when.replace(day=1)).days


def has_name(labels: Labels) -> bool:
    return bool(labels) and labels[0][0] == NAME
