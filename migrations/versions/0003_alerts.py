"""alerts: rule state, alert history, scaling actions, cost ledger and hourly usage

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alert_state",
        sa.Column("rule_key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(32), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("annotations", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("active_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("fired_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("resolved_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("keep_firing_since_ms", sa.BigInteger(), nullable=True),
        sa.Column("last_eval_ms", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("rule_key", "fingerprint", name="pk_alert_state"),
    )
    op.create_table(
        "alert_events",
        sa.Column("id", _id, autoincrement=True, nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("rule_key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(32), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("from_state", sa.String(16), nullable=False),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("annotations", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_alert_events"),
    )
    op.create_index("ix_alert_events_at", "alert_events", ["at_ms"])
    op.create_table(
        "scale_events",
        sa.Column("id", _id, autoincrement=True, nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("scope", sa.String(255), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("from_instances", sa.Integer(), nullable=False),
        sa.Column("to_instances", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_scale_events"),
    )
    op.create_index("ix_scale_events_scope_at", "scale_events", ["scope", "at_ms"])
    op.create_table(
        "cost_ledger",
        sa.Column("id", _id, autoincrement=True, nullable=False),
        sa.Column("hour_ms", sa.BigInteger(), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("gpu", sa.String(255), nullable=False),
        sa.Column("gpu_model", sa.String(255), nullable=False),
        sa.Column("purchase_class", sa.String(32), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("component", sa.String(16), nullable=False),
        sa.Column("dollars", sa.Float(), nullable=False),
        sa.Column("gpu_seconds", sa.Float(), nullable=False),
        sa.Column("energy_joules", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_cost_ledger"),
    )
    op.create_index("ix_cost_ledger_hour", "cost_ledger", ["hour_ms"])
    op.create_table(
        "usage_hourly",
        sa.Column("id", _id, autoincrement=True, nullable=False),
        sa.Column("hour_ms", sa.BigInteger(), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("prompt_tokens", sa.Float(), nullable=False),
        sa.Column("generated_tokens", sa.Float(), nullable=False),
        sa.Column("requests", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_usage_hourly"),
    )
    op.create_index("ix_usage_hourly_hour", "usage_hourly", ["hour_ms"])


def downgrade() -> None:
    op.drop_index("ix_usage_hourly_hour", table_name="usage_hourly")
    op.drop_table("usage_hourly")
    op.drop_index("ix_cost_ledger_hour", table_name="cost_ledger")
    op.drop_table("cost_ledger")
    op.drop_index("ix_scale_events_scope_at", table_name="scale_events")
    op.drop_table("scale_events")
    op.drop_index("ix_alert_events_at", table_name="alert_events")
    op.drop_table("alert_events")
    op.drop_table("alert_state")
