"""Rule files in Prometheus's shape (groups → rules), checked with every problem reported as
``file:line:column: message`` the way ``promtool check rules`` does.

The YAML is composed into nodes so each value keeps its position; an expression error's
offset is mapped back into the file (plain, quoted and block scalars alike).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from alerts.template import TemplateError, check_template
from promql import ExprError, parse
from promql.ast import Node
from promql.lexer import duration_ms

_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
Position = tuple[int, int]  # 1-based line, column


@dataclass(frozen=True, slots=True)
class RuleProblem:
    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


class RuleFileError(Exception):
    def __init__(self, problems: list[RuleProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def _duration(value: object) -> int:
    if value in (None, "", 0):
        return 0
    return duration_ms(str(value))


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    alert: str | None = None
    record: str | None = None
    expr: str
    for_: str | int = Field(default="0s", alias="for")
    keep_firing_for: str | int = "0s"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("for_", "keep_firing_for")
    @classmethod
    def _valid_duration(cls, value: str | int) -> str | int:
        try:
            _duration(value)
        except ExprError as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("labels", "annotations", mode="before")
    @classmethod
    def _stringify(cls, value: object) -> object:
        if isinstance(value, dict):
            return {str(k): "" if v is None else str(v) for k, v in value.items()}
        return value


class GroupSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    interval: str | None = None
    limit: int = 0
    rules: list[RuleSpec] = Field(default_factory=list)


class RuleFileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    groups: list[GroupSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class Rule:
    name: str  # alert name, or the recorded metric name
    kind: str  # "alert" | "record"
    expr_text: str
    expr: Node
    for_ms: int = 0
    keep_firing_for_ms: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    group: str = ""
    source: str = ""  # file:line of the rule
    ordinal: int = 1  # n-th rule of this name in its group (Prometheus allows repeats)

    @property
    def key(self) -> str:
        """Stable identity for state across restarts: group and name (and ordinal if repeated)."""
        base = f"{self.group}/{self.name}"
        return base if self.ordinal == 1 else f"{base}#{self.ordinal}"


@dataclass(frozen=True)
class RuleGroup:
    name: str
    interval_ms: int | None
    rules: tuple[Rule, ...]
    file: str = ""


def _positions(node: yaml.Node, path: tuple[str | int, ...], out: dict[tuple[str | int, ...], yaml.Node]) -> None:
    out[path] = node
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            out[(*path, "#key", key_node.value)] = key_node
            _positions(value_node, (*path, key_node.value), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _positions(item, (*path, i), out)


def _pos_of(loc: tuple[str | int, ...], nodes: dict[tuple[str | int, ...], yaml.Node]) -> Position:
    for cut in range(len(loc), -1, -1):
        key = (*loc[: cut - 1], "#key", loc[cut - 1]) if cut else ()
        node = nodes.get(key) if cut else None
        if node is None:
            node = nodes.get(loc[:cut])
        if node is not None:
            return node.start_mark.line + 1, node.start_mark.column + 1
    return 1, 1


def _expr_position(node: yaml.Node, text: str, offset: int, lines: list[str]) -> Position:
    """File position of character ``offset`` of a scalar's value."""
    assert isinstance(node, yaml.ScalarNode)
    before = node.value[:offset]
    line_in_value = before.count("\n")
    col_in_line = offset - (before.rfind("\n") + 1)
    start_line, start_col = node.start_mark.line, node.start_mark.column
    if node.style in ("|", ">"):
        body_line = start_line + 1 + line_in_value
        raw = lines[body_line] if body_line < len(lines) else ""
        indent = len(raw) - len(raw.lstrip(" "))
        return body_line + 1, indent + col_in_line + 1
    quote = 1 if node.style in ("'", '"') else 0
    if line_in_value == 0:
        return start_line + 1, start_col + quote + col_in_line + 1
    return start_line + line_in_value + 1, col_in_line + 1


def load_rule_text(text: str, file: str) -> list[RuleGroup]:
    """Parse and check a rule file's text; raises :class:`RuleFileError` listing every problem."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise RuleFileError([RuleProblem(file, line, col, f"invalid YAML: {getattr(exc, 'problem', exc)}")]) from None
    if root is None:
        return []
    nodes: dict[tuple[str | int, ...], yaml.Node] = {}
    _positions(root, (), nodes)
    data: Any = yaml.safe_load(text)
    lines = text.splitlines()
    problems: list[RuleProblem] = []

    def pydantic_problems(exc: ValidationError, prefix: tuple[str | int, ...]) -> None:
        for err in exc.errors():
            loc = (*prefix, *("for" if p == "for_" else p for p in err["loc"]))
            line, col = _pos_of(loc, nodes)
            where = ".".join(str(p) for p in loc)
            problems.append(RuleProblem(file, line, col, f"{where}: {err['msg']}"))

    # Each group and each rule is validated on its own so one run reports every problem.
    if not isinstance(data, dict) or set(data) - {"groups"}:
        try:
            RuleFileSpec.model_validate(data)
        except ValidationError as exc:
            pydantic_problems(exc, ())
            raise RuleFileError(problems) from None
    groups: list[RuleGroup] = []
    seen_groups: set[str] = set()
    raw_groups = data.get("groups") or []
    if not isinstance(raw_groups, list):
        line, col = _pos_of(("groups",), nodes)
        raise RuleFileError([RuleProblem(file, line, col, "groups: expected a list of groups")])
    for gi, raw_group in enumerate(raw_groups):
        raw_rules = raw_group.get("rules") if isinstance(raw_group, dict) else None
        try:
            group = GroupSpec.model_validate({**raw_group, "rules": []} if isinstance(raw_group, dict) else raw_group)
        except ValidationError as exc:
            pydantic_problems(exc, ("groups", gi))
            continue
        if group.name in seen_groups:
            line, col = _pos_of(("groups", gi, "name"), nodes)
            problems.append(RuleProblem(file, line, col, f"group name {group.name!r} used twice"))
        seen_groups.add(group.name)
        interval = None
        if group.interval:
            try:
                interval = duration_ms(group.interval)
            except ExprError as exc:
                line, col = _pos_of(("groups", gi, "interval"), nodes)
                problems.append(RuleProblem(file, line, col, exc.message))
        rules: list[Rule] = []
        for ri, raw_rule in enumerate(raw_rules or []):
            base = ("groups", gi, "rules", ri)
            try:
                spec_rule = RuleSpec.model_validate(raw_rule)
            except ValidationError as exc:
                pydantic_problems(exc, base)
                continue
            rule = _build_rule(spec_rule, group.name, base, nodes, lines, file, problems)
            if rule is not None:
                ordinal = 1 + sum(1 for r in rules if r.name == rule.name)
                rules.append(replace(rule, ordinal=ordinal) if ordinal > 1 else rule)
        groups.append(RuleGroup(group.name, interval, tuple(rules), file))
    if problems:
        raise RuleFileError(problems)
    return groups


def _build_rule(
    spec: RuleSpec,
    group: str,
    base: tuple[str | int, ...],
    nodes: dict[tuple[str | int, ...], yaml.Node],
    lines: list[str],
    file: str,
    problems: list[RuleProblem],
) -> Rule | None:
    def problem(loc: tuple[str | int, ...], message: str) -> None:
        line, col = _pos_of((*base, *loc), nodes)
        problems.append(RuleProblem(file, line, col, message))

    before = len(problems)
    if bool(spec.alert) == bool(spec.record):
        problem((), "a rule needs exactly one of 'alert' or 'record'")
        return None
    name = spec.alert or spec.record or ""
    if not _NAME_RE.match(name.replace(":", "_")):
        problem(("alert" if spec.alert else "record",), f"invalid name {name!r}")
    if spec.record and (spec.annotations or spec.for_ not in ("0s", 0)):
        problem(("record",), "recording rules take no 'for' or 'annotations'")
    for label in spec.labels:
        if not _NAME_RE.match(label):
            problem(("labels", label), f"invalid label name {label!r}")
    for section, values in (("labels", spec.labels), ("annotations", spec.annotations)):
        for key, value in values.items():
            try:
                check_template(value)
            except TemplateError as exc:
                problem((section, key), f"{section}.{key}: {exc}")
    expr: Node | None = None
    try:
        expr = parse(spec.expr)
    except ExprError as exc:
        node = nodes.get((*base, "expr"))
        line, col = _expr_position(node, spec.expr, exc.pos, lines) if node is not None else (1, 1)
        problems.append(RuleProblem(file, line, col, f"expr: {exc.message}"))
    if expr is None or len(problems) > before:
        return None
    line, _ = _pos_of(base, nodes)
    return Rule(
        name=name,
        kind="alert" if spec.alert else "record",
        expr_text=spec.expr,
        expr=expr,
        for_ms=_duration(spec.for_),
        keep_firing_for_ms=_duration(spec.keep_firing_for),
        labels=dict(spec.labels),
        annotations=dict(spec.annotations),
        group=group,
        source=f"{file}:{line}",
    )


def load_rule_file(path: str | Path) -> list[RuleGroup]:
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError([RuleProblem(file, 1, 1, f"cannot read: {exc.strerror or exc}")]) from None
    return load_rule_text(text, file)
