"""Parse a PromQL-style series selector: ``name{label="v", other=~"re.*"}``."""

from __future__ import annotations

import re

from store.series_index import Matcher, Selector

_NAME = re.compile(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|\})')


class SelectorError(ValueError):
    """A selector string does not parse; the message names the column."""


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}.get(m.group(1), m.group(0)), text)


def parse_selector(text: str) -> Selector:
    pos = 0
    metric: str | None = None
    found = _NAME.match(text, pos)
    if found and found.group(1):
        metric = found.group(1)
        pos = found.end()
    matchers: list[Matcher] = []
    rest = text[pos:].strip()
    if rest.startswith("{"):
        pos = text.index("{", pos) + 1
        if text[pos:].strip().startswith("}"):
            pos = text.index("}", pos) + 1
        else:
            while True:
                m = _MATCHER.match(text, pos)
                if not m:
                    raise SelectorError(f"bad label matcher at column {pos + 1} of {text!r}")
                try:
                    matchers.append(Matcher(m.group(1), m.group(2), _unescape(m.group(3))))  # type: ignore[arg-type]
                except ValueError as exc:
                    raise SelectorError(f"{exc} (column {m.start(1) + 1})") from exc
                pos = m.end()
                if m.group(4) == "}":
                    break
                if text[pos:].lstrip().startswith("}"):
                    pos = text.index("}", pos) + 1
                    break
    if text[pos:].strip():
        raise SelectorError(f"unexpected text at column {pos + 1} of {text!r}")
    name_matchers = [m for m in matchers if m.label == "__name__" and m.op == "="]
    if metric is None and name_matchers:
        metric = name_matchers[0].value
    if metric is None and not any(m.op in ("=", "=~") and m.value not in ("", ".*") for m in matchers):
        raise SelectorError(f"selector {text!r} needs a metric name or a non-empty matcher")
    return Selector(metric, tuple(matchers))
