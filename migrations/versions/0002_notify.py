"""notify: notification outbox and silences

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notify_outbox",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("integration", sa.String(255), nullable=False),
        sa.Column("receiver", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_ms", sa.BigInteger(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("reason", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_notify_outbox"),
    )
    op.create_index("ix_notify_outbox_state_next_attempt_ms", "notify_outbox", ["state", "next_attempt_ms"])
    op.create_table(
        "notify_log",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("integration", sa.String(255), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("sent_ms", sa.BigInteger(), nullable=False),
        sa.Column("firing", sa.Text(), nullable=False),
        sa.Column("resolved", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notify_log"),
    )
    op.create_index("ix_notify_log_sent_ms", "notify_log", ["sent_ms"])
    op.create_table(
        "notify_alerts",
        sa.Column("fingerprint", sa.String(32), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("annotations", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("starts_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("ends_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("generator_url", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint", name="pk_notify_alerts"),
    )
    op.create_table(
        "notify_silences",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("matchers", sa.Text(), nullable=False),
        sa.Column("starts_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("ends_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.Column("created_by", sa.String(255), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notify_silences"),
    )
    op.create_index("ix_notify_silences_ends_at_ms", "notify_silences", ["ends_at_ms"])


def downgrade() -> None:
    op.drop_index("ix_notify_silences_ends_at_ms", table_name="notify_silences")
    op.drop_table("notify_silences")
    op.drop_table("notify_alerts")
    op.drop_index("ix_notify_log_sent_ms", table_name="notify_log")
    op.drop_table("notify_log")
    op.drop_index("ix_notify_outbox_state_next_attempt_ms", table_name="notify_outbox")
    op.drop_table("notify_outbox")
