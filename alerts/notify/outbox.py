"""The durable outbox: rows written before any send, claimed, then marked sent, retried or failed.

At-least-once: a row leaves ``pending`` only after a 2xx (``sent``) or a permanent failure
(``failed``). Claiming moves ``next_attempt_ms`` past the attempt's deadline (a lease) with a
conditional UPDATE, so one sender owns an attempt, and an attempt cut short by a crash is simply
tried again when the lease runs out. Receivers de-duplicate on the row id (``webhook-id``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Engine, delete, func, insert, select, update

from alerts.notify.schema import outbox as t

State = Literal["pending", "sent", "failed"]


@dataclass(frozen=True)
class OutboxRow:
    id: str
    integration: str
    receiver: str
    kind: str
    group_key: str
    body: str
    created_ms: int
    state: str = "pending"
    attempts: int = 0
    next_attempt_ms: int = 0
    updated_ms: int = 0
    last_status: int | None = None
    last_error: str | None = None
    reason: str | None = None


def _row(mapping: Any) -> OutboxRow:
    return OutboxRow(**{c.name: mapping[c.name] for c in t.columns})


class Outbox:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @staticmethod
    def add(conn: Connection, rows: Sequence[OutboxRow]) -> None:
        """Inserts inside the caller's transaction (with the notification log update)."""
        if rows:
            conn.execute(insert(t), [{c.name: getattr(r, c.name) for c in t.columns} for r in rows])

    def due_integrations(self, now_ms: int) -> list[str]:
        with self._engine.connect() as conn:
            query = select(t.c.integration).where(t.c.state == "pending", t.c.next_attempt_ms <= now_ms).distinct()
            return sorted(conn.execute(query).scalars())

    def oldest_due(self, integration: str, now_ms: int) -> OutboxRow | None:
        with self._engine.connect() as conn:
            query = (
                select(t)
                .where(t.c.state == "pending", t.c.integration == integration, t.c.next_attempt_ms <= now_ms)
                .order_by(t.c.next_attempt_ms, t.c.created_ms, t.c.id)
                .limit(1)
            )
            found = conn.execute(query).mappings().first()
        return _row(found) if found is not None else None

    def oldest_pending(self, integration: str) -> OutboxRow | None:
        """The integration's oldest undelivered row, due or not (a probe of a failing receiver)."""
        with self._engine.connect() as conn:
            query = (
                select(t)
                .where(t.c.state == "pending", t.c.integration == integration)
                .order_by(t.c.created_ms, t.c.id)
                .limit(1)
            )
            found = conn.execute(query).mappings().first()
        return _row(found) if found is not None else None

    def release_backoff(self, integration: str, now_ms: int) -> int:
        """Make every row of ``integration`` waiting on a backoff due now (its receiver answers
        again); rows claimed by an attempt in flight keep their lease."""
        with self._engine.begin() as conn:
            done = conn.execute(
                update(t)
                .where(t.c.state == "pending", t.c.integration == integration, t.c.next_attempt_ms > now_ms,
                       t.c.attempts > 0, t.c.last_error.is_not(None))
                .values(next_attempt_ms=now_ms)
            )
        return int(done.rowcount or 0)

    def claim(self, row: OutboxRow, lease_until_ms: int, now_ms: int) -> bool:
        """Takes the attempt if nobody else did since ``row`` was read; counts the attempt."""
        with self._engine.begin() as conn:
            result = conn.execute(
                update(t)
                .where(t.c.id == row.id, t.c.state == "pending", t.c.next_attempt_ms == row.next_attempt_ms)
                .values(attempts=t.c.attempts + 1, next_attempt_ms=lease_until_ms, updated_ms=now_ms)
            )
            return result.rowcount == 1

    def mark_sent(self, row_id: str, now_ms: int, status: int | None) -> None:
        self._set(row_id, state="sent", updated_ms=now_ms, last_status=status, last_error=None, reason=None)

    def mark_retry(self, row_id: str, next_attempt_ms: int, now_ms: int, status: int | None, error: str, reason: str) -> None:
        self._set(
            row_id, next_attempt_ms=next_attempt_ms, updated_ms=now_ms, last_status=status, last_error=error, reason=reason
        )

    def mark_failed(self, row_id: str, now_ms: int, status: int | None, error: str, reason: str) -> None:
        self._set(row_id, state="failed", updated_ms=now_ms, last_status=status, last_error=error, reason=reason)

    def _set(self, row_id: str, **values: object) -> None:
        with self._engine.begin() as conn:
            conn.execute(update(t).where(t.c.id == row_id).values(**values))

    # -- reads for loops, reports and tests ---------------------------------------------------
    def depth(self) -> int:
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(t).where(t.c.state == "pending")).scalar_one())

    def next_attempt_ms(self, after_ms: int) -> int | None:
        """The earliest attempt scheduled later than ``after_ms`` (rows due now are the poll's)."""
        with self._engine.connect() as conn:
            query = select(func.min(t.c.next_attempt_ms)).where(t.c.state == "pending", t.c.next_attempt_ms > after_ms)
            value = conn.execute(query).scalar()
        return int(value) if value is not None else None

    def get(self, row_id: str) -> OutboxRow | None:
        with self._engine.connect() as conn:
            found = conn.execute(select(t).where(t.c.id == row_id)).mappings().first()
        return _row(found) if found is not None else None

    def rows(self, state: State | None = None, limit: int = 1000) -> list[OutboxRow]:
        query = select(t).order_by(t.c.created_ms, t.c.id).limit(limit)
        if state is not None:
            query = query.where(t.c.state == state)
        with self._engine.connect() as conn:
            return [_row(m) for m in conn.execute(query).mappings()]

    def gc(self, now_ms: int, keep_sent_ms: int, keep_failed_ms: int) -> int:
        with self._engine.begin() as conn:
            sent = conn.execute(delete(t).where(t.c.state == "sent", t.c.updated_ms < now_ms - keep_sent_ms)).rowcount
            failed = conn.execute(
                delete(t).where(t.c.state == "failed", t.c.updated_ms < now_ms - keep_failed_ms)
            ).rowcount
        return int(sent or 0) + int(failed or 0)
