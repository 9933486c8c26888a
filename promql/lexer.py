"""Tokens of the rule language; every token carries its offset for line:column errors."""

from __future__ import annotations

import re
from dataclasses import dataclass


class ExprError(ValueError):
    """A problem in an expression, at ``pos`` (0-based offset into the expression text)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos

    def line_col(self, text: str) -> tuple[int, int]:
        """1-based line and column of ``pos`` inside ``text``."""
        before = text[: self.pos]
        return before.count("\n") + 1, self.pos - (before.rfind("\n") + 1) + 1


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # NUMBER STRING IDENT DURATION OP LPAREN RPAREN LBRACE RBRACE LBRACKET RBRACKET COMMA EOF
    text: str
    pos: int


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, "y": 31_536_000_000}
_DIGITS = frozenset("0123456789")
_DURATION_RE = re.compile(r"(?:\d+(?:ms|s|m|h|d|w|y))+", re.ASCII)
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)", re.ASCII)
_NUMBER_RE = re.compile(r"(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf|NaN)", re.ASCII)
_IDENT_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_OPERATORS = ("==", "!=", ">=", "<=", "=~", "!~", "+", "-", "*", "/", "%", "^", ">", "<", "=")
_SINGLE = {"(": "LPAREN", ")": "RPAREN", "{": "LBRACE", "}": "RBRACE", "[": "LBRACKET", "]": "RBRACKET", ",": "COMMA"}


def duration_ms(text: str, pos: int = 0) -> int:
    if not _DURATION_RE.fullmatch(text):
        raise ExprError(f"bad duration {text!r}: expected e.g. 30s, 5m, 1h30m", pos)
    return sum(int(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "#":  # comment to end of line
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch in _SINGLE:
            tokens.append(Token(_SINGLE[ch], ch, i))
            i += 1
            continue
        if ch in "\"'`":
            j, chars = i + 1, []
            while j < n and text[j] != ch:
                if text[j] == "\\" and ch != "`" and j + 1 < n:
                    chars.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}.get(text[j + 1], "\\" + text[j + 1]))
                    j += 2
                    continue
                chars.append(text[j])
                j += 1
            if j >= n:
                raise ExprError("unterminated string", i)
            tokens.append(Token("STRING", "".join(chars), i))
            i = j + 1
            continue
        # ASCII digits only: str.isdigit() is also true for "³" and other digits no number regex takes
        if ch in _DIGITS or (ch == "." and i + 1 < n and text[i + 1] in _DIGITS):
            dur = _DURATION_RE.match(text, i)
            num = _NUMBER_RE.match(text, i)
            if dur and (not num or dur.end() > num.end()):
                tokens.append(Token("DURATION", dur.group(), i))
                i = dur.end()
                continue
            if num is None:
                raise ExprError(f"bad number literal {text[i:i + 10]!r}", i)
            tokens.append(Token("NUMBER", num.group(), i))
            i = num.end()
            continue
        if ch == ":" and tokens and tokens[-1].kind in ("DURATION", "LBRACKET") and _in_brackets(tokens):
            tokens.append(Token("COLON", ":", i))  # a subquery's [range:step]
            i += 1
            continue
        if ch == "@":
            tokens.append(Token("AT", "@", i))
            i += 1
            continue
        ident = _IDENT_RE.match(text, i)
        if ident:
            word = ident.group()
            kind = "NUMBER" if word.lower() in ("inf", "nan") else "IDENT"
            tokens.append(Token(kind, word, i))
            i = ident.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                tokens.append(Token("OP", op, i))
                i += len(op)
                break
        else:
            raise ExprError(f"unexpected character {ch!r}", i)
    tokens.append(Token("EOF", "", n))
    return tokens


def _in_brackets(tokens: list[Token]) -> bool:
    depth = 0
    for tok in reversed(tokens):
        if tok.kind == "RBRACKET":
            depth += 1
        elif tok.kind == "LBRACKET":
            if depth == 0:
                return True
            depth -= 1
    return False
