"""The procedures' history (migrations/versions/0008_validations.py): one row per ``infermeter
validate`` run (its verdict and the whole result as JSON) and per ``infermeter evaluate`` run (its
ranked candidates as JSON, drawn in the finance report)."""

from __future__ import annotations

import sqlalchemy as sa

from releases.schema import metadata

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
