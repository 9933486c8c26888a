"""The release procedures' tables: the markers (migrations/versions/0007_events.py: deploys and
config changes, drawn on the dashboard's time charts, listed in reports, compared before/after by
``compare``), and the runs of ``infermeter validate`` (verdict and whole result as JSON) and of
``infermeter evaluate`` (ranked candidates as JSON, drawn in the finance report), 0008."""

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

validations = sa.Table(
    "validations",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("url", sa.String(512), nullable=False),
    sa.Column("model", sa.String(255), nullable=False),
    sa.Column("verdict", sa.String(32), nullable=False),
    sa.Column("result", sa.Text(), nullable=False),
    sa.Index("ix_validations_at_ms", "at_ms"),
)

evaluations = sa.Table(
    "evaluations",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("result", sa.Text(), nullable=False),
    sa.Index("ix_evaluations_at_ms", "at_ms"),
)
