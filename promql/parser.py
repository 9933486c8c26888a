"""Recursive-descent parser for the rule language, with PromQL's operator precedence.

Grammar (lowest precedence first)::

    expr    := and ("or" and)*
    and     := cmp (("and" | "unless") cmp)*
    cmp     := add (CMP ["bool"] [matching] add)*
    add     := mul (("+" | "-") [matching] mul)*
    mul     := pow (("*" | "/" | "%") [matching] pow)*
    pow     := unary ("^" [matching] pow)?          (right-associative)
    unary   := "-" unary | postfix
    postfix := primary ("[" DURATION [":" [DURATION]] "]" | "offset" ["-"] DURATION | "@" (NUMBER | start() | end()))*
    primary := NUMBER | STRING | "(" expr ")" | AGG [grouping] "(" [param ","] expr ")" [grouping]
             | FUNC "(" args ")" | selector
    matching:= ("on" | "ignoring") "(" labels ")" [("group_left" | "group_right") ["(" labels ")"]]
"""

from __future__ import annotations

from dataclasses import replace

from promql.ast import (
    AGGREGATIONS,
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
from promql.functions import FUNCTIONS, check_types
from promql.lexer import ExprError, Token, duration_ms, tokenize
from store.series_index import Matcher

_COMPARE = ("==", "!=", ">", "<", ">=", "<=")


MAX_DEPTH = 100  # brackets nested deeper are refused (about 10 Python frames a level; the limit is 1,000)


def parse(text: str) -> Node:
    """Parse and type-check ``text``; raises :class:`ExprError` with the offending offset."""
    tokens = tokenize(text)
    _check_depth(tokens)
    parser = _Parser(tokens)
    try:
        node = parser.expr()
        tok = parser.peek()
        if tok.kind != "EOF":
            raise ExprError(f"unexpected {tok.text!r} after the end of the expression", tok.pos)
        check_types(node)
    except RecursionError:  # nesting without brackets (a long chain of unary minus, say)
        raise ExprError("expression nested too deeply", parser.peek().pos) from None
    return node


def _check_depth(tokens: list[Token]) -> None:
    depth = 0
    for tok in tokens:
        if tok.kind in ("LPAREN", "LBRACKET", "LBRACE"):
            depth += 1
            if depth > MAX_DEPTH:
                raise ExprError(f"expression nested deeper than {MAX_DEPTH} brackets", tok.pos)
        elif tok.kind in ("RPAREN", "RBRACKET", "RBRACE"):
            depth -= 1


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0

    # -- token helpers -----------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, kind: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            found = "the end of the expression" if tok.kind == "EOF" else repr(tok.text)
            raise ExprError(f"expected {what}, found {found}", tok.pos)
        return self.take()

    def is_word(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "IDENT" and tok.text in words

    def is_op(self, *ops: str) -> bool:
        tok = self.peek()
        return tok.kind == "OP" and tok.text in ops

    # -- binary levels -----------------------------------------------------------------------
    def expr(self) -> Node:
        node = self.and_level()
        while self.is_word("or"):
            tok = self.take()
            node = Binary(tok.pos, "or", node, self.and_level(), matching=self.matching())
        return node

    def and_level(self) -> Node:
        node = self.compare()
        while self.is_word("and", "unless"):
            tok = self.take()
            matching = self.matching()
            node = Binary(tok.pos, tok.text, node, self.compare(), matching=matching)
        return node

    def compare(self) -> Node:
        node = self.additive()
        while self.is_op(*_COMPARE):
            tok = self.take()
            as_bool = False
            if self.is_word("bool"):
                self.take()
                as_bool = True
            matching = self.matching()
            node = Binary(tok.pos, tok.text, node, self.additive(), as_bool, matching)
        return node

    def additive(self) -> Node:
        node = self.multiplicative()
        while self.is_op("+", "-"):
            tok = self.take()
            matching = self.matching()
            node = Binary(tok.pos, tok.text, node, self.multiplicative(), matching=matching)
        return node

    def multiplicative(self) -> Node:
        node = self.power()
        while self.is_op("*", "/", "%"):
            tok = self.take()
            matching = self.matching()
            node = Binary(tok.pos, tok.text, node, self.power(), matching=matching)
        return node

    def power(self) -> Node:
        node = self.unary()
        if self.is_op("^"):
            tok = self.take()
            matching = self.matching()
            return Binary(tok.pos, "^", node, self.power(), matching=matching)
        return node

    def unary(self) -> Node:
        if self.is_op("-", "+"):
            tok = self.take()
            inner = self.unary()
            if tok.text == "+":
                return inner
            if isinstance(inner, NumberLiteral):
                return NumberLiteral(tok.pos, -inner.value)
            return Unary(tok.pos, "-", inner)
        return self.postfix()

    def matching(self) -> VectorMatching:
        if not self.is_word("on", "ignoring"):
            return VectorMatching()
        on = self.take().text == "on"
        labels = self.label_list()
        group: str | None = None
        include: tuple[str, ...] = ()
        if self.is_word("group_left", "group_right"):
            group = self.take().text.removeprefix("group_")
            if self.peek().kind == "LPAREN":
                include = self.label_list()
        return VectorMatching(on, labels, group, include)

    # -- operands ----------------------------------------------------------------------------
    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.peek().kind == "LBRACKET":
                node = self.bracket(node)
            elif self.is_word("offset"):
                node = self.offset(node)
            elif self.peek().kind == "AT":
                node = self.at(node)
            else:
                return node

    def bracket(self, node: Node) -> Node:
        bracket = self.take()
        dur = self.expect("DURATION", "a duration such as 5m")
        range_ms = duration_ms(dur.text, dur.pos)
        if self.peek().kind == "COLON":  # a subquery
            self.take()
            step_ms = 0
            if self.peek().kind == "DURATION":
                step = self.take()
                step_ms = duration_ms(step.text, step.pos)
            self.expect("RBRACKET", "']'")
            if isinstance(node, VectorSelector) and node.range_ms is not None or isinstance(node, Subquery):
                raise ExprError("a subquery needs an instant vector expression, not a range", bracket.pos)
            return Subquery(node.pos, node, range_ms, step_ms)
        self.expect("RBRACKET", "']'")
        if not isinstance(node, VectorSelector) or node.range_ms is not None:
            raise ExprError("a range [..] can only follow a metric selector (use [range:step] for a subquery)", bracket.pos)
        if node.offset_ms or node.at is not None:
            raise ExprError("the range [..] goes before offset and @", bracket.pos)
        return replace(node, range_ms=range_ms)

    def offset(self, node: Node) -> Node:
        word = self.take()
        if not isinstance(node, (VectorSelector, Subquery)):
            raise ExprError("offset can only follow a metric selector or a subquery", word.pos)
        if node.offset_ms:
            raise ExprError("offset given twice", word.pos)
        sign = 1
        if self.is_op("-", "+"):
            sign = -1 if self.take().text == "-" else 1
        dur = self.expect("DURATION", "a duration after offset")
        return replace(node, offset_ms=sign * duration_ms(dur.text, dur.pos))

    def at(self, node: Node) -> Node:
        tok = self.take()
        if not isinstance(node, (VectorSelector, Subquery)):
            raise ExprError("@ can only follow a metric selector or a subquery", tok.pos)
        if node.at is not None:
            raise ExprError("@ given twice", tok.pos)
        if self.is_word("start", "end"):
            which = self.take().text
            self.expect("LPAREN", f"'(' after {which}")
            self.expect("RPAREN", "')'")
            return replace(node, at=which)
        sign = 1.0
        if self.is_op("-", "+"):
            sign = -1.0 if self.take().text == "-" else 1.0
        num = self.expect("NUMBER", "a unix time, start() or end() after @")
        value = sign * _number(num)
        if value != value or value in (float("inf"), float("-inf")):
            raise ExprError("@ needs a finite time", num.pos)
        return replace(node, at=int(round(value * 1000)))

    def primary(self) -> Node:
        tok = self.peek()
        if tok.kind == "NUMBER":
            self.take()
            return NumberLiteral(tok.pos, _number(tok))
        if tok.kind == "STRING":
            self.take()
            return StringLiteral(tok.pos, tok.text)
        if tok.kind == "LPAREN":
            self.take()
            inner = self.expr()
            self.expect("RPAREN", "')'")
            return inner
        if tok.kind == "LBRACE":
            return self.selector(None, tok.pos)
        if tok.kind == "IDENT":
            self.take()
            if tok.text in AGGREGATIONS and (self.peek().kind == "LPAREN" or self.is_word("by", "without")):
                return self.aggregate(tok)
            if self.peek().kind == "LPAREN":
                return self.call(tok)
            return self.selector(tok.text, tok.pos)
        found = "the end of the expression" if tok.kind == "EOF" else repr(tok.text)
        raise ExprError(f"expected a number, selector, function or '(', found {found}", tok.pos)

    def selector(self, name: str | None, pos: int) -> VectorSelector:
        matchers: list[Matcher] = []
        if self.peek().kind == "LBRACE":
            self.take()
            while self.peek().kind != "RBRACE":
                label = self.expect("IDENT", "a label name")
                op = self.peek()
                if not (op.kind == "OP" and op.text in ("=", "!=", "=~", "!~")):
                    raise ExprError(f"expected =, !=, =~ or !~ after label {label.text!r}", op.pos)
                self.take()
                value = self.expect("STRING", "a quoted label value")
                try:
                    matchers.append(Matcher(label.text, op.text, value.text))  # type: ignore[arg-type]
                except ValueError as exc:
                    raise ExprError(str(exc), value.pos) from None
                if self.peek().kind == "COMMA":
                    self.take()
                elif self.peek().kind != "RBRACE":
                    raise ExprError("expected ',' or '}' in the label matchers", self.peek().pos)
            self.take()
        if name is None:
            named = [m for m in matchers if m.label == "__name__" and m.op == "="]
            if named:
                name = named[0].value
                matchers = [m for m in matchers if m is not named[0]]
            elif not any(m.op in ("=", "=~") and m.value for m in matchers):
                raise ExprError("a selector needs a metric name or a non-empty matcher", pos)
        return VectorSelector(pos, name, tuple(matchers))

    def label_list(self) -> tuple[str, ...]:
        self.expect("LPAREN", "'(' and a list of labels")
        labels: list[str] = []
        while self.peek().kind != "RPAREN":
            labels.append(self.expect("IDENT", "a label name").text)
            if self.peek().kind == "COMMA":
                self.take()
            elif self.peek().kind != "RPAREN":
                raise ExprError("expected ',' or ')' in the label list", self.peek().pos)
        self.take()
        return tuple(labels)

    def aggregate(self, op: Token) -> Aggregate:
        grouping: tuple[str, ...] = ()
        without = False
        seen_grouping = False
        if self.is_word("by", "without"):
            without = self.take().text == "without"
            grouping = self.label_list()
            seen_grouping = True
        self.expect("LPAREN", f"'(' after {op.text}")
        param: Node | None = None
        first = self.expr()
        if self.peek().kind == "COMMA":
            self.take()
            param, first = first, self.expr()
        self.expect("RPAREN", "')'")
        if self.is_word("by", "without"):
            word = self.peek()
            if seen_grouping:
                raise ExprError("grouping given twice", word.pos)
            without = self.take().text == "without"
            grouping = self.label_list()
        needs_param = op.text in ("quantile", "topk", "bottomk", "count_values")
        if needs_param and param is None:
            raise ExprError(f"{op.text} needs a parameter: {op.text}(param, vector)", op.pos)
        if not needs_param and param is not None:
            raise ExprError(f"{op.text} takes no parameter", op.pos)
        return Aggregate(op.pos, op.text, first, grouping, without, param)

    def call(self, name: Token) -> Call:
        if name.text not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise ExprError(f"unknown function {name.text!r} (known: {known})", name.pos)
        self.expect("LPAREN", "'('")
        args: list[Node] = []
        while self.peek().kind != "RPAREN":
            args.append(self.expr())
            if self.peek().kind == "COMMA":
                self.take()
            elif self.peek().kind != "RPAREN":
                raise ExprError("expected ',' or ')' in the arguments", self.peek().pos)
        self.take()
        return Call(name.pos, name.text, tuple(args))


def _number(tok: Token) -> float:
    text = tok.text
    if text.lower().startswith("0x"):
        return float(int(text, 16))
    return float(text)
