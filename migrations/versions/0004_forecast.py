"""forecast: stored forecasts

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "forecast_runs",
        sa.Column("id", _id, autoincrement=True, nullable=False),
        sa.Column("series", sa.String(255), nullable=False),
        sa.Column("generated_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("start_ms", sa.BigInteger(), nullable=False),
        sa.Column("step_ms", sa.Integer(), nullable=False),
        sa.Column("horizon", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("backtest_wape", sa.Double(), nullable=True),
        sa.Column("backtest_mase", sa.Double(), nullable=True),
        sa.Column("backtest_coverage80", sa.Double(), nullable=True),
        sa.Column("history_points", sa.Integer(), nullable=False),
        sa.Column("flags", sa.Text(), nullable=False),
        sa.Column("warnings", sa.Text(), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_forecast_runs"),
    )
    op.create_index("ix_forecast_runs_series_generated_at_ms", "forecast_runs", ["series", "generated_at_ms"])
    op.create_table(
        "forecast_points",
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("ts_ms", sa.BigInteger(), nullable=False),
        sa.Column("mean", sa.Double(), nullable=True),
        sa.Column("lo80", sa.Double(), nullable=True),
        sa.Column("hi80", sa.Double(), nullable=True),
        sa.Column("lo95", sa.Double(), nullable=True),
        sa.Column("hi95", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["forecast_runs.id"], name="fk_forecast_points_run_id_forecast_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "step", name="pk_forecast_points"),
    )


def downgrade() -> None:
    op.drop_table("forecast_points")
    op.drop_index("ix_forecast_runs_series_generated_at_ms", table_name="forecast_runs")
    op.drop_table("forecast_runs")
