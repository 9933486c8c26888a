"""Grammar of single exposition lines, shared by :mod:`collector.exposition.parser`.

Internal: the regular expressions, the metadata/label/value/exemplar readers that the parse
loop calls on a cache miss or on unusual value text, the dialect probe (:func:`_detect`) and
the family-of-a-sample rule (:func:`_family_of`).  Every reader signals a malformed line by
raising :class:`_Bad`; the loop turns that into a :class:`~collector.exposition.ParseError`
carrying the line number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Final

from store.types import SeriesKey

_NAME_RE: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_VALUE: Final = r'[^"\\]*(?:\\.[^"\\]*)*'  # body of a quoted label value (escapes paired)
_SEPS_RE: Final = re.compile(r'(?:,[a-zA-Z_][a-zA-Z0-9_]*=(?:",[a-zA-Z_][a-zA-Z0-9_]*=)*)?')
_STEP_RE: Final = re.compile(  # '}' or one name="value" with its ',' (or before '}')
    r'[ \t]*(?:(\})|([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"(' + _VALUE + r')"[ \t]*(?:,|(?=\})))'
)
_DIAG_RE: Final = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)?([ \t]*=[ \t]*")?')
_QUOTED_RE: Final = re.compile("(" + _VALUE + ')"')
_ESCAPE_RE: Final = re.compile(r"\\(.)")
_HELP_ESCAPE_RE: Final = re.compile(r'\\[\\n"]')
_META_RE: Final = re.compile(r"#[ \t]+(HELP|TYPE|UNIT)(?:[ \t]+(\S+))?(?:[ \t]+(.*))?$")
_TYPES: Final = frozenset(("counter", "gauge", "histogram", "summary", "untyped", "info", "stateset",
                           "gaugehistogram", "unknown"))
_SUFFIXES: Final[dict[str, tuple[str, ...]]] = {  # sample suffixes belonging to a typed family
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("_count", "_sum", "_created"),
    "info": ("_info",),
}
_ALL_SUFFIXES: Final = ("_bucket", "_count", "_sum", "_total", "_created", "_info", "_gcount", "_gsum")


class _Bad(Exception):
    """Internal: the current line is malformed (``args[0]``: why); the loop adds the line number."""


def _detect(text: str, lines: list[str]) -> bool:
    """Whether the body holds a ``# EOF`` or ``# UNIT`` line (as the main loop reads lines)."""
    if "# EOF" in text or "# UNIT" in text:
        for line in lines:
            line = line.strip(" \t\r")
            if line == "# EOF" or ((m := _META_RE.match(line)) is not None and m.group(1) == "UNIT"):
                return True
    return False


def _meta(line: str) -> tuple[str, ...]:
    """(kind, name, text) for HELP/TYPE/UNIT, ("EOF",) for ``# EOF``, () for other comments."""
    if line == "# EOF":
        return ("EOF",)
    m = _META_RE.match(line)
    if m is None:
        return ()
    kind, name, rest = m.groups()
    if name is None or _NAME_RE.fullmatch(name) is None:
        raise _Bad(f"invalid metric name in # {kind} line")
    if kind == "TYPE" and rest not in _TYPES:
        raise _Bad("missing metric type" if rest is None else f"unknown metric type {rest!r}")
    if kind == "HELP" and rest and "\\" in rest:
        rest = _HELP_ESCAPE_RE.sub(lambda e: "\n" if e.group() == "\\n" else e.group()[1], rest)
    return (kind, name, rest or "")


def _unescape_label(raw: str) -> str:
    def one(m: re.Match[str]) -> str:
        c = m.group(1)
        if c == "n":
            return "\n"
        if c == "\\" or c == '"':
            return c
        raise _Bad(f"invalid escape sequence \\{c} in label value")

    return _ESCAPE_RE.sub(one, raw)


def _label_error(text: str, pos: int) -> str:
    """Why no label (nor '}') could be read at ``pos``."""
    m = _DIAG_RE.match(text, pos)
    assert m is not None  # every part is optional
    after = text[m.end() :].lstrip(" \t")
    if m.group(1) is None:
        return "invalid label name" if after else "unterminated label set"
    if m.group(2) is None:
        return "unterminated label set" if not after else (
            "expected '=\"' after label name" if text[m.end()] in " \t=" else "invalid label name")
    value = _QUOTED_RE.match(text, m.end())
    if value is None:
        return "unterminated label value"
    _unescape_label(value.group(1))  # raises on a bad escape
    return "expected ',' or '}' after label value" if text[value.end() :].strip(" \t") else (
        "unterminated label set")


def _labels(text: str, start: int) -> tuple[list[tuple[str, str]], int]:
    """The label set whose '{' is at ``start``: decoded pairs and the index after '}'."""
    end = text.rfind("}")  # usual case: no escapes or blanks, the set ends at the last '}'
    if end > start and "\\" not in text[start:end]:
        parts = ("," + text[start + 1 : end]).split('"')  # [',n1=', v1, ',n2=', v2, tail]
        if len(parts) & 1:
            seps = parts[0::2]
            tail = seps.pop()
            if (tail == "" or tail == ",") and _SEPS_RE.fullmatch('"'.join(seps)) is not None:
                return [(sep[1:-1], value) for sep, value in zip(seps, parts[1::2])], end + 1
    pairs: list[tuple[str, str]] = []
    pos = start + 1
    while (m := _STEP_RE.match(text, pos)) is not None:
        if m.group(1) is not None:
            return pairs, m.end()
        raw = m.group(3)
        pairs.append((m.group(2), _unescape_label(raw) if "\\" in raw else raw))
        pos = m.end()
    raise _Bad(_label_error(text, pos))


def _parse_series(line: str, keep: Callable[[str], bool] | None) -> tuple[bool, str, SeriesKey, int] | None:
    """Cache miss: (has labels, cache text, key, index where the value text starts), or None
    when ``keep`` rejects the metric name (the labels are then not looked at)."""
    m = _NAME_RE.match(line)
    if m is None:
        raise _Bad("invalid metric name")
    name, end = m.group(), m.end()
    nxt = line[end : end + 1]
    if nxt != "{" and nxt != " " and nxt != "\t":
        raise _Bad("missing value" if not nxt else "invalid metric name")
    if keep is not None and not keep(name):
        return None
    if nxt != "{":
        return False, name, SeriesKey(name), end
    labels, end = _labels(line, end)
    if len({label for label, _ in labels}) != len(labels):
        names = [label for label, _ in labels]
        raise _Bad(f"duplicate label name {next(n for i, n in enumerate(names) if n in names[:i])!r}")
    return True, line[: end - 1], SeriesKey(name, tuple(labels)), end


def _value_ts(rest: str, om: bool) -> tuple[float, int | None]:
    """Reference parse of the text after the series: ``<blank>value[<blank>timestamp]``."""
    if not rest or (rest[0] != " " and rest[0] != "\t"):
        raise _Bad("expected blank before value" if rest.strip() else "missing value")
    if not rest.isascii() or "_" in rest:
        raise _Bad("invalid value")
    toks = rest.split()
    if not toks or len(toks) > 2:
        raise _Bad("unexpected text after timestamp" if toks else "missing value")
    try:
        value = float(toks[0])
    except ValueError:
        raise _Bad("invalid value") from None
    if len(toks) == 1:
        return value, None
    try:
        if om:  # float seconds
            seconds = float(toks[1])
            ts = round(seconds * 1000.0) if math.isfinite(seconds) else None
        else:  # integer milliseconds
            ts = int(toks[1])
    except ValueError:
        ts = None
    if ts is None or not -(2**63) <= ts < 2**63:
        raise _Bad("invalid timestamp")
    return value, ts


def _check_exemplar(text: str) -> None:
    """``text`` follows ``' # '``: ``{labels} value [timestamp]``; validated, then dropped."""
    if not text.startswith("{"):
        raise _Bad("invalid exemplar")
    _value_ts(text[_labels(text, 0)[1] :], True)


def _family_of(name: str, types: dict[str, str]) -> str:
    if name not in types:
        for suffix in _ALL_SUFFIXES:
            if name.endswith(suffix) and suffix in _SUFFIXES.get(types.get(name[: -len(suffix)], ""), ()):
                return name[: -len(suffix)]
    return name
