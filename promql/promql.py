"""Renders an expression tree as PromQL text, for users who run Prometheus on our exported names.

Everything but ``group_ratio`` is PromQL already and renders as itself (operators' operands
parenthesised so precedence never shifts); ``group_ratio(v, "l1", ...)`` becomes
``v / on(l1, ...) group_left avg by (l1, ...) (v)``.
"""

from __future__ import annotations

import json

from promql.ast import (
    Aggregate,
    Binary,
    Call,
    Node,
    NumberLiteral,
    StringLiteral,
    Subquery,
    Unary,
    VectorMatching,
    VectorSelector,
)
from promql.lexer import ExprError


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:g}" if abs(value) < 1e15 else repr(value)


def _selector(node: VectorSelector) -> str:
    matchers = ", ".join(f"{m.label}{m.op}{json.dumps(m.value)}" for m in node.matchers)
    text = node.name or ""
    if matchers or not text:
        text += "{" + matchers + "}"
    if node.range_ms is not None:
        text += f"[{_duration(node.range_ms)}]"
    return text + _modifiers(node.offset_ms, node.at)


def _modifiers(offset_ms: int, at: int | str | None) -> str:
    text = ""
    if at is not None:
        text += f" @ {at}()" if isinstance(at, str) else f" @ {at / 1000:.3f}"
    if offset_ms:
        text += f" offset {'-' if offset_ms < 0 else ''}{_duration(abs(offset_ms))}"
    return text


def _matching(m: VectorMatching) -> str:
    if not m.on and not m.labels and m.group is None:
        return ""
    text = f" {'on' if m.on else 'ignoring'}({', '.join(m.labels)})"
    if m.group:
        # Always with its (possibly empty) label list: a bare group_left before a parenthesised
        # operand would read that operand as the label list.
        text += f" group_{m.group}({', '.join(m.include)})"
    return text


def _operand(node: Node) -> str:
    """Binary and unary operands are parenthesised, so precedence never shifts; atoms are not."""
    text = to_promql(node)
    return f"({text})" if isinstance(node, (Binary, Unary)) else text


def to_promql(node: Node) -> str:
    if isinstance(node, NumberLiteral):
        return _number(node.value)
    if isinstance(node, StringLiteral):
        return json.dumps(node.value)
    if isinstance(node, VectorSelector):
        return _selector(node)
    if isinstance(node, Unary):
        return f"-{_operand(node.expr)}"
    if isinstance(node, Subquery):
        step = _duration(node.step_ms) if node.step_ms else ""
        inner = to_promql(node.expr)
        inner = inner if isinstance(node.expr, (VectorSelector, Call, Aggregate)) else f"({inner})"
        return f"{inner}[{_duration(node.range_ms)}:{step}]" + _modifiers(node.offset_ms, node.at)
    if isinstance(node, Binary):
        op = node.op + (" bool" if node.return_bool else "")
        return f"{_operand(node.lhs)} {op}{_matching(node.matching)} {_operand(node.rhs)}"
    if isinstance(node, Aggregate):
        grouping = f" {'without' if node.without else 'by'} ({', '.join(node.grouping)})" if node.grouping or node.without else ""
        param = f"{to_promql(node.param)}, " if node.param is not None else ""
        return f"{node.op}{grouping} ({param}{to_promql(node.expr)})"
    if isinstance(node, Call):
        if node.func == "group_ratio":
            inner = to_promql(node.args[0])
            labels = []
            for arg in node.args[1:]:
                if not isinstance(arg, StringLiteral):
                    raise ExprError("group_ratio's labels must be string literals", arg.pos)
                labels.append(arg.value)
            on = ", ".join(labels)
            by = f" by ({on})" if labels else ""
            return f"({inner} / on({on}) group_left avg{by} ({inner}))"
        return f"{node.func}({', '.join(to_promql(a) for a in node.args)})"
    raise ExprError(f"cannot render {type(node).__name__} as PromQL", node.pos)
