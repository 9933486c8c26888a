"""The expression tree of the rule language (a documented subset of PromQL plus `group_ratio`).

Every node remembers where it started (0-based offset into the expression text) so evaluation
and validation errors can be reported as file:line:column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from store.series_index import Matcher

AGGREGATIONS = frozenset({
    "sum", "avg", "min", "max", "count", "stddev", "stdvar", "quantile", "topk", "bottomk", "count_values", "group",
})
COMPARISONS = frozenset({"==", "!=", ">", "<", ">=", "<="})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "^"})
SET_OPS = frozenset({"and", "or", "unless"})


@dataclass(frozen=True)
class Node:
    pos: int


@dataclass(frozen=True)
class NumberLiteral(Node):
    value: float


@dataclass(frozen=True)
class StringLiteral(Node):
    value: str


# An `@` modifier: a fixed time in ms, or the query's "start" / "end".
At = int | str | None


@dataclass(frozen=True)
class VectorSelector(Node):
    name: str | None
    matchers: tuple[Matcher, ...] = ()
    range_ms: int | None = None  # set for a range selector `x[5m]`
    offset_ms: int = 0
    at: At = None


@dataclass(frozen=True)
class Subquery(Node):
    """``expr[range:step]``: ``expr`` evaluated at every multiple of ``step`` in the range (the
    query's step when ``step_ms`` is 0), as a range vector."""

    expr: Node
    range_ms: int
    step_ms: int = 0
    offset_ms: int = 0
    at: At = None


@dataclass(frozen=True)
class Call(Node):
    func: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Aggregate(Node):
    op: str
    expr: Node
    grouping: tuple[str, ...] = ()
    without: bool = False
    param: Node | None = None


@dataclass(frozen=True)
class VectorMatching:
    on: bool = False  # True: match on `labels`; False: ignoring `labels`
    labels: tuple[str, ...] = ()
    group: str | None = None  # "left" | "right" for many-to-one
    include: tuple[str, ...] = ()  # labels copied from the "one" side


@dataclass(frozen=True)
class Binary(Node):
    op: str
    lhs: Node
    rhs: Node
    return_bool: bool = False
    matching: VectorMatching = field(default_factory=VectorMatching)


@dataclass(frozen=True)
class Unary(Node):
    op: str
    expr: Node


def walk(node: Node) -> list[Node]:
    """The node and all its descendants, parents first."""
    out: list[Node] = [node]
    if isinstance(node, Call):
        for arg in node.args:
            out.extend(walk(arg))
    elif isinstance(node, Aggregate):
        if node.param is not None:
            out.extend(walk(node.param))
        out.extend(walk(node.expr))
    elif isinstance(node, Binary):
        out.extend(walk(node.lhs))
        out.extend(walk(node.rhs))
    elif isinstance(node, (Unary, Subquery)):
        out.extend(walk(node.expr))
    return out
