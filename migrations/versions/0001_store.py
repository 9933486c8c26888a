"""store: series, write-ahead, chunks, rollups

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "series",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("metric", sa.String(255), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("label_hash", sa.BigInteger(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.UniqueConstraint("label_hash", name="uq_series_label_hash"),
    )
    op.create_index("ix_series_metric", "series", ["metric"])
    op.create_table(
        "wal",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_wal"),
    )
    op.create_table(
        "chunks",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("series_id", sa.BigInteger(), nullable=False),
        sa.Column("start_ms", sa.BigInteger(), nullable=False),
        sa.Column("end_ms", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("encoding", sa.SmallInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_chunks"),
    )
    op.create_index("uq_chunks_series_id_start_ms", "chunks", ["series_id", "start_ms"], unique=True)
    op.create_index("ix_chunks_end_ms", "chunks", ["end_ms"])
    op.create_table(
        "rollups",
        sa.Column("resolution_ms", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.BigInteger(), nullable=False),
        sa.Column("bucket_ms", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.Double(), nullable=False) for name in ("sum", "min", "max", "first", "last", "inc")),
        sa.PrimaryKeyConstraint("resolution_ms", "series_id", "bucket_ms", name="pk_rollups"),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "postgresql":
        # Payloads and chunks are already compact binary: skip PostgreSQL's TOAST compression
        # attempt, which costs more CPU than the write itself.
        op.execute("ALTER TABLE wal ALTER COLUMN payload SET STORAGE EXTERNAL")
        op.execute("ALTER TABLE chunks ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("rollups")
    op.drop_index("ix_chunks_end_ms", table_name="chunks")
    op.drop_index("uq_chunks_series_id_start_ms", table_name="chunks")
    op.drop_table("chunks")
    op.drop_table("wal")
    op.drop_index("ix_series_metric", table_name="series")
    op.drop_table("series")
