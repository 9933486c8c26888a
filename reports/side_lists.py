"""The report's side lists, each read from where it lives: the audit log's changes, the versions
and settings per node (the info series, see :mod:`drift.table`), the deploy and config markers,
and the stored ``infermeter evaluate`` runs. Each is a callable ``(start_ms, end_ms) -> lines``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from access.audit import AuditLog
from drift.table import changes, drift_table, history, latest
from releases.markers import MarkerStore
from reports.model import ChangeLine, EvaluationLine, EventLine, SoftwareLine
from store.interfaces import SeriesReader

MAX_CHANGES = 10_000


class AuditChanges:
    """Every change of the period from the audit log, oldest first."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def __call__(self, start_ms: int, end_ms: int) -> list[ChangeLine]:
        entries = self.audit.entries(since_ms=start_ms, until_ms=end_ms, limit=MAX_CHANGES)
        return [ChangeLine(e["at_ms"], e["action"], e["object"], e["actor"], e["role"], e["address"])
                for e in reversed(entries)]


class VersionHistory:
    """Every version and watched setting per node in the period: odd where it differs from most
    nodes at the end, and what it replaced on its node."""

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


class RecordedEvents:
    """The deploy and config-change markers of the period, oldest first."""

    def __init__(self, markers: MarkerStore) -> None:
        self.markers = markers

    def __call__(self, start_ms: int, end_ms: int) -> list[EventLine]:
        return [EventLine(m.at_ms, m.kind, m.model, m.version, m.node, m.message, m.actor)
                for m in self.markers.between(start_ms, end_ms - 1, limit=10_000)]


class StoredEvaluations:
    """The ``infermeter evaluate`` runs of the period, each run's candidates in rank order."""

    def __init__(self, read: Callable[[int, int], list[tuple[int, int, dict[str, Any]]]]) -> None:
        self.read = read  # releases.runs.EvaluationStore.between

    def __call__(self, start_ms: int, end_ms: int) -> list[EvaluationLine]:
        out = []
        for run, at_ms, result in self.read(start_ms, end_ms):
            for r in result.get("rows", []):
                out.append(EvaluationLine(at_ms, run, str(r["candidate"]), str(r["gpu"]), int(r["gpus"]),
                                          str(r["purchase_class"]), float(r["dollars_per_hour"]),
                                          r.get("tokens_per_s_per_gpu"), r.get("ttft_p99_s"), r.get("itl_p99_ms"),
                                          r.get("dollars_per_million"), str(r.get("sla", ""))))
        return out
