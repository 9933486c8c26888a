"""Durations as config files and APIs write them: ``15s``, ``5m``, ``1h30m``, ``500ms``, ``7d``;
a bare number is seconds (as in Prometheus's HTTP API). Held as integer milliseconds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, "y": 31_536_000_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")


def parse_duration_ms(value: object) -> int:
    """``"90s"`` -> 90000, ``"1h30m"`` -> 5400000, ``2.5`` -> 2500; raises ValueError saying why."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 15s, 5m, 2h or 7d")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a duration must not be negative")
        return int(round(value * 1000))
    if isinstance(value, str):
        text = value.replace(" ", "")
        parts = _PART.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return sum(int(round(float(n) * _UNIT_MS[u])) for n, u in parts)
    raise ValueError(f"expected a duration like 15s, 5m, 2h or 7d, got {value!r}")


def format_duration(ms: int) -> str:
    for unit in ("d", "h", "m", "s"):
        if ms and ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


# A settings field holding a duration: written "15s", held as integer milliseconds.
DurationMs = Annotated[int, BeforeValidator(parse_duration_ms)]
