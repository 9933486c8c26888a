"""Time as a parameter: domain code asks a Clock, tests drive a ManualClock."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to (tests walk hours of time in milliseconds)."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self._mono = 0.0

    def now_ms(self) -> int:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, ms: int) -> None:
        self._now += ms
        self._mono += ms / 1000

    def set(self, now_ms: int) -> None:
        self._mono += max(0, now_ms - self._now) / 1000
        self._now = now_ms
