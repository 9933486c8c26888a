"""Tables of the access layer (migrations/versions/0006_access.py): API tokens, kept as SHA-256
digests only, and the audit log, which the database itself keeps append-only (triggers refuse
UPDATE and DELETE)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import MetaData

metadata = MetaData()

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("created_ms", sa.BigInteger(), nullable=False),
    sa.Column("created_by", sa.String(255), nullable=False),
    sa.Column("expires_ms", sa.BigInteger(), nullable=True),
    sa.Column("revoked_ms", sa.BigInteger(), nullable=True),
    sa.UniqueConstraint("sha256", name="uq_api_tokens_sha256"),
)

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("address", sa.String(255), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("object", sa.String(512), nullable=False),
    sa.Column("before", sa.Text(), nullable=True),
    sa.Column("after", sa.Text(), nullable=True),
    sa.Index("ix_audit_log_at_ms", "at_ms"),
)
