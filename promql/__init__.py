"""The rule expression language: a documented subset of PromQL evaluated on our store."""

import math

from promql.evaluate import EvalContext, SampleSource, Value, context_at
from promql.lexer import ExprError
from promql.parser import parse
from promql.vector import Vector


def first_value(ctx: EvalContext, expr: str) -> float:
    """An expression's one number at ``ctx``: a scalar as itself, a vector's first element; NaN
    when the vector is empty (what the alert enrichers and the acceptance check read)."""
    value = ctx.evaluate(parse(expr))
    if isinstance(value, Vector):
        return float(value.values[0]) if len(value) else math.nan
    return float(value) if not isinstance(value, str) else math.nan


__all__ = ["context_at", "EvalContext", "ExprError", "SampleSource", "Value", "Vector", "first_value", "parse"]
