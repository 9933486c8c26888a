"""Requests per principal, per class of route ("query", "write"), in a moving window (the
``limits`` package, in memory: each process of a pair limits its own share)."""

from __future__ import annotations

import time

from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from access.settings import RateLimitSettings


class RateLimits:
    def __init__(self, settings: RateLimitSettings) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._items: dict[str, list[RateLimitItem]] = {}
        for kind in ("query", "write"):
            text = getattr(settings, kind)
            if text:
                self._items[kind] = parse_many(text)

    def over(self, kind: str | None, key: str) -> tuple[str, int] | None:
        """None when the request may go; else (the limit it exceeds, seconds until it may retry)."""
        if kind is None or kind not in self._items:
            return None
        for item in self._items[kind]:
            if not self._limiter.hit(item, kind, key):
                reset_s, _remaining = self._limiter.get_window_stats(item, kind, key)
                # the library keeps its windows by the wall clock; the retry hint is read from it too
                return str(item), max(1, int(reset_s - time.time()) + 1)
        return None

