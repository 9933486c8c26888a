"""Function signatures and the static type check (scalar, instant vector, range vector, string).

The set is what our default rules and Prometheus users need; every function here has a PromQL
equivalent (``group_ratio`` is rewritten when rules are exported, see :mod:`promql.promql`).
"""

from __future__ import annotations

from dataclasses import dataclass

from promql.ast import (
    Aggregate,
    Binary,
    Call,
    Node,
    NumberLiteral,
    StringLiteral,
    Subquery,
    Unary,
    VectorSelector,
)
from promql.lexer import ExprError

SCALAR, VECTOR, RANGE, STRING = "scalar", "vector", "range", "string"
# Element-wise math (numpy names in promql.calls) and calendar functions of PromQL.
MATH = ("ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn", "acos", "acosh", "asin", "asinh", "atan",
        "atanh", "cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad")
CALENDAR = ("day_of_month", "day_of_week", "day_of_year", "days_in_month", "hour", "minute", "month", "year")


@dataclass(frozen=True)
class Signature:
    args: tuple[str, ...]
    returns: str
    variadic: str | None = None  # kind of any number of extra trailing args
    min_args: int | None = None  # defaults to len(args)
    doc: str = ""


FUNCTIONS: dict[str, Signature] = {
    "rate": Signature((RANGE,), VECTOR, doc="per-second increase of a counter over the range, resets corrected"),
    "increase": Signature((RANGE,), VECTOR, doc="increase of a counter over the range, resets corrected"),
    "irate": Signature((RANGE,), VECTOR, doc="per-second rate from the last two samples"),
    "delta": Signature((RANGE,), VECTOR, doc="last minus first sample of a gauge, extrapolated to the range"),
    "changes": Signature((RANGE,), VECTOR, doc="how many times the value changed"),
    "resets": Signature((RANGE,), VECTOR, doc="how many counter resets"),
    "avg_over_time": Signature((RANGE,), VECTOR),
    "min_over_time": Signature((RANGE,), VECTOR),
    "max_over_time": Signature((RANGE,), VECTOR),
    "sum_over_time": Signature((RANGE,), VECTOR),
    "count_over_time": Signature((RANGE,), VECTOR),
    "last_over_time": Signature((RANGE,), VECTOR),
    "histogram_quantile": Signature((SCALAR, VECTOR), VECTOR, doc="quantile from *_bucket rates (le label)"),
    "abs": Signature((VECTOR,), VECTOR),
    "clamp_min": Signature((VECTOR, SCALAR), VECTOR),
    "clamp_max": Signature((VECTOR, SCALAR), VECTOR),
    "absent": Signature((VECTOR,), VECTOR, doc="1 with the selector's equality labels when nothing matches"),
    "scalar": Signature((VECTOR,), SCALAR, doc="the single element's value, else NaN"),
    "vector": Signature((SCALAR,), VECTOR),
    "time": Signature((), SCALAR, doc="evaluation time in seconds"),
    "label_replace": Signature((VECTOR, STRING, STRING, STRING, STRING), VECTOR),
    "label_join": Signature((VECTOR, STRING, STRING), VECTOR, variadic=STRING),
    "deriv": Signature((RANGE,), VECTOR, doc="per-second derivative by simple linear regression"),
    "predict_linear": Signature((RANGE, SCALAR), VECTOR, doc="linear-regression value t seconds ahead"),
    "holt_winters": Signature((RANGE, SCALAR, SCALAR), VECTOR, doc="double exponential smoothing (sf, tf)"),
    "quantile_over_time": Signature((SCALAR, RANGE), VECTOR),
    "stddev_over_time": Signature((RANGE,), VECTOR),
    "stdvar_over_time": Signature((RANGE,), VECTOR),
    "present_over_time": Signature((RANGE,), VECTOR),
    "absent_over_time": Signature((RANGE,), VECTOR),
    "sort": Signature((VECTOR,), VECTOR),
    "sort_desc": Signature((VECTOR,), VECTOR),
    "round": Signature((VECTOR, SCALAR), VECTOR, min_args=1),
    "clamp": Signature((VECTOR, SCALAR, SCALAR), VECTOR),
    "timestamp": Signature((VECTOR,), VECTOR, doc="each sample's timestamp in seconds"),
    "pi": Signature((), SCALAR),
    **{name: Signature((VECTOR,), VECTOR) for name in MATH},
    **{name: Signature((VECTOR,), VECTOR, min_args=0) for name in CALENDAR},
    "group_ratio": Signature(
        (VECTOR,),
        VECTOR,
        variadic=STRING,
        doc="each value divided by the mean of its group; groups by the given labels, fleet-wide without",
    ),
}


def check_types(node: Node) -> str:
    """The kind ``node`` evaluates to; raises :class:`ExprError` at the first mismatch."""
    if isinstance(node, NumberLiteral):
        return SCALAR
    if isinstance(node, StringLiteral):
        return STRING
    if isinstance(node, VectorSelector):
        return RANGE if node.range_ms is not None else VECTOR
    if isinstance(node, Subquery):
        if check_types(node.expr) != VECTOR:
            raise ExprError("a subquery needs an instant vector expression", node.pos)
        return RANGE
    if isinstance(node, Unary):
        kind = check_types(node.expr)
        if kind not in (SCALAR, VECTOR):
            raise ExprError(f"unary minus needs a scalar or instant vector, got a {kind}", node.pos)
        return kind
    if isinstance(node, Aggregate):
        if node.param is not None:
            want = STRING if node.op == "count_values" else SCALAR
            if check_types(node.param) != want:
                raise ExprError(f"{node.op}'s parameter must be a {want}", node.param.pos)
        if check_types(node.expr) != VECTOR:
            raise ExprError(f"{node.op} aggregates an instant vector (use rate(x[5m]) for ranges)", node.expr.pos)
        return VECTOR
    if isinstance(node, Call):
        return _check_call(node)
    if isinstance(node, Binary):
        return _check_binary(node)
    raise ExprError(f"unsupported expression {type(node).__name__}", node.pos)


def _check_call(node: Call) -> str:
    sig = FUNCTIONS[node.func]
    minimum = len(sig.args) if sig.min_args is None else sig.min_args
    if len(node.args) < minimum or (sig.variadic is None and len(node.args) > len(sig.args)):
        want = f"{len(sig.args)}" + (" or more" if sig.variadic else "")
        raise ExprError(f"{node.func}() takes {want} argument(s), got {len(node.args)}", node.pos)
    for i, arg in enumerate(node.args):
        want = sig.args[i] if i < len(sig.args) else (sig.variadic or "")
        got = check_types(arg)
        if got != want:
            hint = " (add a range, e.g. [5m])" if want == RANGE and got == VECTOR else ""
            raise ExprError(f"argument {i + 1} of {node.func}() must be a {want}, got a {got}{hint}", arg.pos)
    return sig.returns


def _check_binary(node: Binary) -> str:
    lhs, rhs = check_types(node.lhs), check_types(node.rhs)
    for side, kind in ((node.lhs, lhs), (node.rhs, rhs)):
        if kind not in (SCALAR, VECTOR):
            raise ExprError(f"operator {node.op} needs scalars or instant vectors, got a {kind}", side.pos)
    if node.op in ("and", "or", "unless"):
        if lhs != VECTOR or rhs != VECTOR:
            raise ExprError(f"{node.op} works on two instant vectors", node.pos)
        return VECTOR
    if node.op in ("==", "!=", ">", "<", ">=", "<=") and lhs == rhs == SCALAR and not node.return_bool:
        raise ExprError("comparing two scalars needs the bool modifier", node.pos)
    return VECTOR if VECTOR in (lhs, rhs) else SCALAR
