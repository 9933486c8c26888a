"""Small shared pieces of the NCCL line parsers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

E = TypeVar("E")

GB = 1e9  # NCCL, nccl-tests and the Inspector all compute GB/s as bytes / 1e9 / seconds


@dataclass(slots=True)
class Parsed(Generic[E]):
    """What a batch of lines gave: the events, and how many lines were not recognised."""

    events: list[E] = field(default_factory=list)
    ignored: int = 0


def parse_many(parse: Callable[[str], E | None], lines: Iterable[str]) -> Parsed[E]:
    out: Parsed[E] = Parsed()
    for line in lines:
        event = parse(line)
        if event is None:
            out.ignored += 1
        else:
            out.events.append(event)
    return out


def to_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def to_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # no NaN from log text
