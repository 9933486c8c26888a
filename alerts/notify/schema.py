"""Tables of notification (alerts.notify); migrated by Alembic (migrations/versions/0002_notify.py).

All timestamps are integer milliseconds UTC. Label sets and matcher lists are JSON text.

* ``notify_outbox``   — one row per notification to one integration, written (with the log
                        row below) in one transaction before any send; ``id`` is the
                        ``webhook-id`` receivers de-duplicate on. ``next_attempt_ms`` doubles as
                        the claim: a sender moves it past its deadline before sending, so a
                        crash mid-send retries after that deadline.
* ``notify_log``      — per (integration, group key): when it was last notified and which
                        alerts were firing / resolved in it (Alertmanager's notification log);
                        repeat_interval and "anything new?" survive restarts through it.
* ``notify_alerts``   — the alerts the pipeline holds (firing, or resolved but not yet
                        notified), so a restart neither forgets a resolution nor re-waits.
* ``notify_silences`` — silences with their matchers, window and author.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Double, Index, Integer, MetaData, String, Table, Text

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

outbox = Table(
    "notify_outbox",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("integration", String(255), nullable=False),  # "<receiver>/<kind>/<index>"
    Column("receiver", String(255), nullable=False),
    Column("kind", String(16), nullable=False),  # webhook | alertmanager | slack
    Column("group_key", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("state", String(16), nullable=False),  # pending | sent | failed
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_ms", BigInteger, nullable=False),
    Column("updated_ms", BigInteger, nullable=False),
    Column("last_status", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("reason", String(64), nullable=True),
    Index("ix_notify_outbox_state_next_attempt_ms", "state", "next_attempt_ms"),
)

log = Table(
    "notify_log",
    metadata,
    Column("id", String(64), primary_key=True),  # sha256(integration NUL group_key)
    Column("integration", String(255), nullable=False),
    Column("group_key", Text, nullable=False),
    Column("sent_ms", BigInteger, nullable=False),
    Column("firing", Text, nullable=False),  # JSON list of fingerprints
    Column("resolved", Text, nullable=False),
    Index("ix_notify_log_sent_ms", "sent_ms"),
)

alerts = Table(
    "notify_alerts",
    metadata,
    Column("fingerprint", String(32), primary_key=True),
    Column("labels", Text, nullable=False),
    Column("annotations", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("starts_at_ms", BigInteger, nullable=False),
    Column("ends_at_ms", BigInteger, nullable=True),
    Column("generator_url", Text, nullable=False),
    Column("value", Double, nullable=True),
    Column("updated_ms", BigInteger, nullable=False),
)

silences = Table(
    "notify_silences",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("matchers", Text, nullable=False),  # JSON list of {name, value, isRegex, isEqual}
    Column("starts_at_ms", BigInteger, nullable=False),
    Column("ends_at_ms", BigInteger, nullable=False),
    Column("updated_ms", BigInteger, nullable=False),
    Column("created_by", String(255), nullable=False),
    Column("comment", Text, nullable=False),
    Index("ix_notify_silences_ends_at_ms", "ends_at_ms"),
)
