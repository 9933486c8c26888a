"""The report's versions and settings per node, read from the info series (see :mod:`drift.table`)."""

from __future__ import annotations

from drift.table import changes, drift_table, history, latest
from reports.model import SoftwareLine
from store.interfaces import SeriesReader


class VersionHistory:
    def __init__(self, reader: SeriesReader) -> None:
        self.reader = reader

    def __call__(self, start_ms: int, end_ms: int) -> list[SoftwareLine]:
        spans = history(self.reader, start_ms, end_ms)
        current = latest(spans)
        table = drift_table(current)
        replaced = {after: before.value for before, after in changes(spans)}
        odd = {s for s in current if (s.cluster, s.node, s.column) in table.odd}
        return [SoftwareLine(s.node, s.cluster, s.column, s.value, s.first_ms, s.last_ms, s in odd, replaced.get(s, ""))
                for s in spans]
