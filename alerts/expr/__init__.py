"""The rule expression language: a documented subset of PromQL evaluated on our store."""

from alerts.expr.evaluate import EvalContext, SampleSource, Value
from alerts.expr.lexer import ExprError
from alerts.expr.parser import parse
from alerts.expr.vector import Vector

__all__ = ["EvalContext", "ExprError", "SampleSource", "Value", "Vector", "parse"]
