"""Load ``infermeter.yaml`` into :class:`Settings`, reporting every problem as
``file:line: field: message`` (like ``promtool check config``).

The YAML is composed into nodes first so that each key keeps its line; pydantic's error
locations are then mapped back to the line of the deepest key that exists in the file.
Environment variables override secrets and the store URL, after the file is read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from infermeter.settings import Settings

DEFAULT_CONFIG = "infermeter.yaml"
ENV_CONFIG = "INFERMETER_CONFIG"
# Environment variable -> (section, field); these win over the file.
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "INFERMETER_STORE_URL": ("store", "url"),
    "INFERMETER_API_TOKEN": ("server", "api_token"),
    "INFERMETER_HOST": ("server", "host"),
    "INFERMETER_PORT": ("server", "port"),
}


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class ConfigError(Exception):
    """The config file is unreadable or invalid; ``problems`` lists every one found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def resolve_config_path(explicit: str | None, environ: Mapping[str, str]) -> tuple[Path, bool]:
    """The file to read and whether it was asked for (a missing default file is fine)."""
    if explicit:
        return Path(explicit), True
    if environ.get(ENV_CONFIG):
        return Path(environ[ENV_CONFIG]), True
    return Path(DEFAULT_CONFIG), False


def _node_lines(node: yaml.Node, path: tuple[str | int, ...], out: dict[tuple[str | int, ...], int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[(*path, key)] = key_node.start_mark.line + 1
            _node_lines(value_node, (*path, key), out)
            # The value's own line stays with the key: errors point at the key.
            out[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, (*path, i), out)


def _line_for(loc: tuple[str | int, ...], lines: dict[tuple[str | int, ...], int]) -> int:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return 1


def _field_name(loc: tuple[str | int, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith("function-"))]
    return ".".join(parts) or "(root)"


def parse_config_text(text: str, filename: str, environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=yaml.SafeLoader) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise ConfigError([ConfigProblem(filename, line, "(yaml)", str(exc.problem or exc).strip())]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem(filename, 1, "(yaml)", str(exc))]) from exc
    lines: dict[tuple[str | int, ...], int] = {}
    if node is not None:
        _node_lines(node, (), lines)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([ConfigProblem(filename, 1, "(root)", "the config must be a mapping of sections")])
    data = _apply_env(data, environ)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            message = err["msg"]
            if message.startswith("Value error, "):
                message = message[len("Value error, "):]
            env_name = _env_source(loc, environ)
            file = f"${env_name}" if env_name else filename
            line = 0 if env_name else _line_for(loc, lines)
            problems.append(ConfigProblem(file, line, _field_name(loc), message))
        raise ConfigError(problems) from exc


def _env_source(loc: tuple[str | int, ...], environ: Mapping[str, str]) -> str | None:
    for name, (section, field) in ENV_OVERRIDES.items():
        if loc[:2] == (section, field) and environ.get(name):
            return name
    return None


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    merged = dict(data)
    for name, (section, field) in ENV_OVERRIDES.items():
        value = environ.get(name)
        if not value:
            continue
        current = merged.get(section)
        block = dict(current) if isinstance(current, dict) else {}
        block[field] = value
        merged[section] = block
    return merged


def load_settings(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[Settings, str]:
    """Settings from the chosen file (or defaults when the default file is absent)."""
    environ = os.environ if environ is None else environ
    path, required = resolve_config_path(explicit, environ)
    if not path.exists():
        if required:
            raise ConfigError([ConfigProblem(str(path), 0, "(file)", "no such config file")])
        return parse_config_text("", "(defaults)", environ), "(defaults)"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(str(path), 0, "(file)", f"cannot read: {exc}")]) from exc
    return parse_config_text(text, str(path), environ), str(path)


def settings_or_report(config: str | None, err: TextIO) -> Settings | None:
    """The settings of a one-shot command; None after printing every problem (file:line: field)."""
    try:
        settings, _ = load_settings(config)
        return settings
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        return None
