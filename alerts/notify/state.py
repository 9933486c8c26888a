"""Rows of what the pipeline must remember across restarts: held alerts and the notification log.

The pipeline keeps both in memory and writes only changes, inside the same transaction as the
outbox rows a flush produces, so after a crash the database never says "notified" without the
notification being in the outbox, nor the reverse.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update

from alerts.model import Alert
from alerts.notify.dedup import LogEntry
from alerts.notify.schema import alerts as alerts_table
from alerts.notify.schema import log as log_table


def log_id(integration: str, group_key: str) -> str:
    return hashlib.sha256(f"{integration}\x00{group_key}".encode()).hexdigest()


def load_alerts(engine: Engine) -> list[Alert]:
    with engine.connect() as conn:
        rows = conn.execute(select(alerts_table)).mappings().all()
    return [_alert_from_row(r) for r in rows]


def load_log(engine: Engine) -> dict[tuple[str, str], LogEntry]:
    with engine.connect() as conn:
        rows = conn.execute(select(log_table)).mappings().all()
    return {
        (r["integration"], r["group_key"]): LogEntry(
            int(r["sent_ms"]), frozenset(json.loads(r["firing"])), frozenset(json.loads(r["resolved"]))
        )
        for r in rows
    }


def write_alerts(conn: Connection, inserted: Iterable[Alert], updated: Iterable[Alert], deleted: Iterable[str], now_ms: int) -> None:
    new_rows = [_alert_row(a, now_ms) for a in inserted]
    if new_rows:
        conn.execute(insert(alerts_table), new_rows)
    for alert in updated:
        conn.execute(
            update(alerts_table).where(alerts_table.c.fingerprint == alert.fingerprint).values(_alert_row(alert, now_ms))
        )
    gone = list(deleted)
    if gone:
        conn.execute(delete(alerts_table).where(alerts_table.c.fingerprint.in_(gone)))


def write_log(conn: Connection, integration: str, group_key: str, entry: LogEntry, exists: bool) -> None:
    values = {
        "sent_ms": entry.sent_ms,
        "firing": json.dumps(sorted(entry.firing)),
        "resolved": json.dumps(sorted(entry.resolved)),
    }
    row_id = log_id(integration, group_key)
    if exists:
        conn.execute(update(log_table).where(log_table.c.id == row_id).values(values))
    else:
        conn.execute(insert(log_table).values(id=row_id, integration=integration, group_key=group_key, **values))


def gc_log(conn: Connection, horizon_ms: int) -> int:
    return int(conn.execute(delete(log_table).where(log_table.c.sent_ms < horizon_ms)).rowcount or 0)


def _alert_row(a: Alert, now_ms: int) -> dict[str, Any]:
    return {
        "fingerprint": a.fingerprint,
        "labels": json.dumps(dict(sorted(a.labels.items()))),
        "annotations": json.dumps(dict(sorted(a.annotations.items()))),
        "status": a.status,
        "starts_at_ms": a.starts_at_ms,
        "ends_at_ms": a.ends_at_ms,
        "generator_url": a.generator_url,
        "value": a.value,
        "updated_ms": now_ms,
    }


def _alert_from_row(r: Any) -> Alert:
    return Alert(
        labels=json.loads(r["labels"]),
        annotations=json.loads(r["annotations"]),
        status="resolved" if r["status"] == "resolved" else "firing",
        starts_at_ms=int(r["starts_at_ms"]),
        ends_at_ms=int(r["ends_at_ms"]) if r["ends_at_ms"] is not None else None,
        generator_url=r["generator_url"],
        value=float(r["value"]) if r["value"] is not None else None,
        fingerprint=r["fingerprint"],
    )
