"""Tables of rule state, alert history, scaling actions and the cost ledger; migrated by Alembic
(migrations/versions/0003_alerts.py)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import MetaData

metadata = MetaData()
_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# One row per (rule, label set) that is pending, firing, or recently resolved: what a restart
# needs to keep `for` timers (a `for: 10m` alert restarted at minute 6 still fires at minute 10).
alert_state = sa.Table(
    "alert_state",
    metadata,
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

# Every transition, for the dashboard's history and for reports.
alert_events = sa.Table(
    "alert_events",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("rule_key", sa.String(255), nullable=False),
    sa.Column("fingerprint", sa.String(32), nullable=False),
    sa.Column("labels", sa.Text(), nullable=False),
    sa.Column("from_state", sa.String(16), nullable=False),
    sa.Column("to_state", sa.String(16), nullable=False),
    sa.Column("value", sa.Float(), nullable=True),
    # The annotations at the transition (runbook, the cost-spike checks): kept with the
    # history so reports can show them long after the alert is gone.
    sa.Column("annotations", sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint("id", name="pk_alert_events"),
)
sa.Index("ix_alert_events_at", alert_events.c.at_ms)

# Scale-out / scale-in recommendations (queue backlog rule), one per cooldown per scope.
scale_events = sa.Table(
    "scale_events",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("scope", sa.String(255), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("from_instances", sa.Integer(), nullable=False),
    sa.Column("to_instances", sa.Integer(), nullable=False),
    sa.Column("reason", sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint("id", name="pk_scale_events"),
)
sa.Index("ix_scale_events_scope_at", scale_events.c.scope, scale_events.c.at_ms)

# Cost per hour, per GPU and component (gpu, energy, idle, overhead), attributed to a model and
# tenant. An hour is always rewritten whole, so re-pricing is delete + insert.
cost_ledger = sa.Table(
    "cost_ledger",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
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
sa.Index("ix_cost_ledger_hour", cost_ledger.c.hour_ms)

# Tokens and requests per hour, model, node and tenant: the denominators of cost per token.
usage_hourly = sa.Table(
    "usage_hourly",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("hour_ms", sa.BigInteger(), nullable=False),
    sa.Column("model", sa.String(255), nullable=False),
    sa.Column("node", sa.String(255), nullable=False),
    sa.Column("tenant", sa.String(255), nullable=False),
    sa.Column("prompt_tokens", sa.Float(), nullable=False),
    sa.Column("generated_tokens", sa.Float(), nullable=False),
    sa.Column("requests", sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint("id", name="pk_usage_hourly"),
)
sa.Index("ix_usage_hourly_hour", usage_hourly.c.hour_ms)
