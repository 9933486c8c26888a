"""The audit log: every change of a price, budget, rule file or config, silence, token or
threshold, with who, when, from where, and the value before and after. Rows are only ever
inserted (the database refuses UPDATE and DELETE on the table, see the 0006 migration)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from access.principal import Principal, Role
from access.schema import audit_log
from store.clock import Clock

SYSTEM = Principal("system", Role.ADMIN, "system")


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change and from which address ("signal" for SIGHUP, "cli" for a command)."""

    principal: Principal
    address: str


def _text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


class AuditLog:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock

    def record(self, actor: Actor, action: str, target: str, before: Any = None, after: Any = None) -> None:
        row = {"at_ms": self.clock.now_ms(), "actor": actor.principal.name[:255], "role": actor.principal.role.label,
               "address": actor.address[:255], "action": action[:64], "object": target[:512],
               "before": _text(before), "after": _text(after)}
        with self.engine.begin() as conn:
            conn.execute(sa.insert(audit_log).values(**row))

    def entries(self, since_ms: int | None = None, until_ms: int | None = None, action: str | None = None,
                limit: int = 1000) -> list[dict[str, Any]]:
        """Newest first."""
        query = sa.select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
        if since_ms is not None:
            query = query.where(audit_log.c.at_ms >= since_ms)
        if until_ms is not None:
            query = query.where(audit_log.c.at_ms < until_ms)
        if action is not None:
            query = query.where(audit_log.c.action == action)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [{**dict(r), "before": _json(r["before"]), "after": _json(r["after"])} for r in rows]


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)
