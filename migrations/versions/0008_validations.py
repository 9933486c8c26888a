"""validations and evaluations: the acceptance check's and the hardware evaluation's history

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "validations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("url", sa.String(512), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
    )
    op.create_index("ix_validations_at_ms", "validations", ["at_ms"])
    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
    )
    op.create_index("ix_evaluations_at_ms", "evaluations", ["at_ms"])


def downgrade() -> None:
    op.drop_index("ix_evaluations_at_ms", table_name="evaluations")
    op.drop_table("evaluations")
    op.drop_index("ix_validations_at_ms", table_name="validations")
    op.drop_table("validations")
