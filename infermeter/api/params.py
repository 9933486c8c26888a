"""Query parameters as Prometheus's HTTP API spells them: times and durations."""

from __future__ import annotations

import math
import re
from datetime import datetime

from store.durations import parse_duration_ms

_RELATIVE = re.compile(r"^now\s*(?:-\s*(.+))?$")


class BadParam(ValueError):
    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"{name}: {message}")


def parse_time_ms(name: str, value: str | None, now_ms: int, default_ms: int | None = None) -> int:
    """Unix seconds (float), RFC 3339, or ``now`` / ``now-1h``."""
    if value is None or value == "":
        if default_ms is None:
            raise BadParam(name, "is required")
        return default_ms
    text = value.strip()
    relative = _RELATIVE.match(text)
    try:
        if relative:
            return now_ms - (parse_duration_ms(relative.group(1)) if relative.group(1) else 0)
        number = float(text)
        if not math.isfinite(number):
            raise BadParam(name, f"not a finite time: {value!r}")
        return int(round(number * 1000))
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError as exc:
        raise BadParam(name, f"expected unix seconds, RFC 3339 or now-<duration>, got {value!r}") from exc


def positive_duration_ms(name: str, value: str) -> int:
    """A duration such as ``1h`` that must be positive; BadParam (400) names the parameter."""
    try:
        parsed = parse_duration_ms(value)
    except ValueError as exc:
        raise BadParam(name, str(exc)) from None
    if parsed <= 0:
        raise BadParam(name, "must be positive")
    return parsed


def parse_step_ms(name: str, value: str | None, default_ms: int) -> int:
    if value is None or value == "":
        return default_ms
    try:
        step = parse_duration_ms(float(value)) if re.fullmatch(r"\d+(\.\d+)?", value.strip()) else parse_duration_ms(value)
    except ValueError as exc:
        raise BadParam(name, str(exc)) from exc
    if step <= 0:
        raise BadParam(name, "must be positive")
    return step
