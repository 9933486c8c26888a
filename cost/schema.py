"""Price and budget changes made through the API or dashboard (migrations/versions/0006_access.py).
The config file's price book is the base; these rows, in order, are applied on top of it."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import MetaData

metadata = MetaData()

cost_changes = sa.Table(
    "cost_changes",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("at_ms", sa.BigInteger(), nullable=False),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("body", sa.Text(), nullable=False),
)
