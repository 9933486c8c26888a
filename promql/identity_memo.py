"""Results remembered by the identity of the object they were computed from.

A range query evaluates the same series at every step, and the steps share their label tuples
and lists (the selector's window hands the same objects to each step), so work on labels --
dropping the name, rewriting with label_replace, grouping for an aggregation -- is done once
per object. An entry holds the object itself, so its id cannot be given to another object
while the entry lives; the memo is emptied when it reaches its size, never grown without bound.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: dict[tuple[Hashable, ...], tuple[object, V]] = {}

    def get(self, obj: object, *extra: Hashable) -> V | None:
        hit = self._entries.get((id(obj), *extra))
        return hit[1] if hit is not None and hit[0] is obj else None

    def put(self, obj: object, value: V, *extra: Hashable) -> V:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[(id(obj), *extra)] = (obj, value)
        return value
