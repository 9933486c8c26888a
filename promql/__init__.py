"""The rule expression language: a documented subset of PromQL evaluated on our store."""

from promql.evaluate import EvalContext, SampleSource, Value, context_at
from promql.lexer import ExprError
from promql.parser import parse
from promql.vector import Vector

__all__ = ["context_at", "EvalContext", "ExprError", "SampleSource", "Value", "Vector", "parse"]
