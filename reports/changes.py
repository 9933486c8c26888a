"""The report's change list, read from the audit log (oldest first)."""

from __future__ import annotations

from access.audit import AuditLog
from reports.model import ChangeLine

MAX_CHANGES = 10_000


class AuditChanges:
    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def __call__(self, start_ms: int, end_ms: int) -> list[ChangeLine]:
        entries = self.audit.entries(since_ms=start_ms, until_ms=end_ms, limit=MAX_CHANGES)
        return [ChangeLine(e["at_ms"], e["action"], e["object"], e["actor"], e["role"], e["address"])
                for e in reversed(entries)]
