"""Version and setting changes on a node, turned into ``software`` markers (issue: a driver, NCCL
or engine upgrade is a release like any other, and the cost-spike check should name it).

Each cost tick the leader reads the last ``lookback`` of the info series (:mod:`drift.table`) and
records a marker for every value that replaced another on the same node and column, at the
step it was first seen, unless that marker exists already (so a restart or a handover to the
other process of a pair records nothing twice).
"""

from __future__ import annotations

import logging

from drift.table import changes, history
from releases.markers import MarkerStore
from store.interfaces import SeriesReader

log = logging.getLogger(__name__)
ACTOR = "infermeter"


class SoftwareChangeRecorder:
    def __init__(self, reader: SeriesReader, markers: MarkerStore, lookback_ms: int = 30 * 60_000) -> None:
        self.reader = reader
        self.markers = markers
        self.lookback_ms = lookback_ms

    def __call__(self, now_ms: int) -> int:
        """Record the changes seen in the last ``lookback``; how many markers were added."""
        start = now_ms - self.lookback_ms
        found = changes(history(self.reader, start, now_ms, points=self.lookback_ms // 60_000))
        if not found:
            return 0
        known = {(m.node, m.message) for m in self.markers.between(start - self.lookback_ms, now_ms, kind="software")}
        added = 0
        for before, after in found:
            message = f"{after.column} {before.value} -> {after.value}"
            if (after.node, message) in known:
                continue
            self.markers.add("software", node=after.node, version=after.value, message=message,
                             at_ms=min(after.first_ms, now_ms), actor=ACTOR)
            known.add((after.node, message))
            added += 1
        if added:
            log.info("recorded %d software change marker(s)", added)
        return added
