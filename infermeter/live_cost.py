"""The price book in effect: the config's ``cost:`` plus the changes made through the API
(:mod:`cost.changes`), applied to the running parts whenever the newest change moves."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cost.changes import CostChange, CostChanges, apply_changes
from cost.prices import CostSettings


class LiveCost:
    def __init__(self, changes: CostChanges, base: CostSettings, use: Callable[[CostSettings], None]) -> None:
        """``base``: the config file's book; ``use``: hands a new book to the parts that price."""
        self.changes = changes
        self.base = base
        self._use = use
        self._seen = -1
        self.current = base  # the book in use: base with every change applied
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Re-apply when another process (or this one) added a change; one cheap query otherwise."""
        with self._lock:
            newest = self.changes.newest_id()
            if newest == self._seen:
                return
            self.current = apply_changes(self.base, self.changes.all())
            self._use(self.current)
            self._seen = newest

    def change(self, kind: str, body: dict[str, Any], actor: str) -> None:
        """Validate by applying it to the book in use first (a bad change never lands; changes
        only add entries or replace a budget, so that is the book it will be part of), then
        store and use it."""
        self.refresh()
        apply_changes(self.current, [CostChange(0, 0, actor, kind, body)])
        self.changes.add(kind, body, actor)
        self.refresh()
