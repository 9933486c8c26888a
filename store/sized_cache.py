"""A dictionary bounded by the total size of what it holds (ids, labels), not by its number of
entries: one selector can match a hundred thousand series and another three. Past the budget
every entry is dropped at once; the caches that use it are refilled by the next cycle's asks."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedCache(Generic[K, V]):
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: dict[K, tuple[V, int]] = {}
        self.held = 0  # total size of the entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        hit = self._entries.get(key)
        return hit[0] if hit is not None else None

    def put(self, key: K, value: V, size: int) -> V:
        """Remember ``value`` (replacing what ``key`` held); everything goes when over budget."""
        old = self._entries.pop(key, None)
        if old is not None:
            self.held -= old[1]
        if self.held + size > self.budget:
            self.clear()
        self._entries[key] = (value, size)
        self.held += size
        return value

    def clear(self) -> None:
        if self._entries:
            self._entries, self.held = {}, 0
