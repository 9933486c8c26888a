"""The markers table (migrations/versions/0007_events.py): deploys and config changes, drawn on
the dashboard's time charts, listed in reports and compared before/after by ``compare``."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import MetaData

metadata = MetaData()

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("model", sa.String(255), nullable=False),
    sa.Column("version", sa.String(255), nullable=False),
    sa.Column("node", sa.String(255), nullable=False),
    sa.Column("message", sa.Text(), nullable=False),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("created_ms", sa.BigInteger(), nullable=False),
    sa.Index("ix_events_at_ms", "at_ms"),
)
