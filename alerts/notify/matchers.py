"""Label matchers as Alertmanager writes them: ``name="v"``, ``name!="v"``, ``name=~"re"``, ``name!~"re"``.

Regular expressions are fully anchored (``=~"a|b"`` means ``^(?:a|b)$``), as in Prometheus. A
missing label matches as the empty string, so ``team=""`` selects alerts without a team label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

from store.regex import LabelRegex, RegexError, label_regex

MatchOp = Literal["=", "!=", "=~", "!~"]

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$', re.DOTALL)


@dataclass(frozen=True)
class Matcher:
    name: str
    op: MatchOp
    value: str
    _regex: LabelRegex | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not _LABEL_NAME.match(self.name):
            raise ValueError(f"invalid label name {self.name!r}")
        if self.op in ("=~", "!~"):
            try:
                compiled = label_regex(self.value, dot_nl=True)  # RE2: linear time, anchored
            except RegexError as exc:
                raise ValueError(f"invalid regular expression {self.value!r}: {exc}") from None
            object.__setattr__(self, "_regex", compiled)

    @property
    def is_regex(self) -> bool:
        return self.op in ("=~", "!~")

    @property
    def is_equal(self) -> bool:
        return self.op in ("=", "=~")

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.name, "")
        if self._regex is not None:
            hit = self._regex.fullmatch(value)
        else:
            hit = value == self.value
        return hit if self.is_equal else not hit

    def __str__(self) -> str:
        return f"{self.name}{self.op}{json.dumps(self.value, ensure_ascii=False)}"

    # -- Alertmanager API v2 JSON form ------------------------------------------------------------
    def to_api(self) -> dict[str, object]:
        return {"name": self.name, "value": self.value, "isRegex": self.is_regex, "isEqual": self.is_equal}

    @classmethod
    def from_api(cls, name: str, value: str, is_regex: bool, is_equal: bool = True) -> Matcher:
        op: MatchOp = ("=~" if is_equal else "!~") if is_regex else ("=" if is_equal else "!=")
        return cls(name, op, value)


def parse_matcher(text: str) -> Matcher:
    """``severity="critical"`` -> Matcher. Values may be double-quoted (with JSON escapes) or bare."""
    found = _MATCHER.match(text)
    if not found:
        raise ValueError(f'expected a matcher like name="value", name!="value", name=~"re" or name!~"re", got {text!r}')
    name, op, raw = found.groups()
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"badly quoted value in matcher {text!r}") from None
        if not isinstance(value, str):
            raise ValueError(f"badly quoted value in matcher {text!r}")
    else:
        value = raw
    return Matcher(name, cast(MatchOp, op), value)  # the regex admits only the four operators


def matches_all(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    return all(m.matches(labels) for m in matchers)


def format_matchers(matchers: Iterable[Matcher]) -> str:
    """``{a="1", b=~"x"}`` — the route-path element of an Alertmanager group key."""
    return "{" + ", ".join(str(m) for m in matchers) + "}"


def format_labels(labels: Mapping[str, str]) -> str:
    """``{alertname="X", cluster="a"}`` — sorted, as Prometheus prints a label set."""
    return "{" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(labels.items())) + "}"
