"""forecast runs keep the out-of-sample coverage of their 95 % interval beside the 80 % one

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("forecast_runs") as batch:
        batch.add_column(sa.Column("backtest_coverage95", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("forecast_runs") as batch:
        batch.drop_column("backtest_coverage95")
