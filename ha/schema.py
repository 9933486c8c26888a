"""The lease table (migrations/versions/0005_ha_lease.py): one row per pair that leads."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import MetaData

metadata = MetaData()

# ``token`` grows by one at every change of holder: the fencing token leader-only writes check.
# Times are the database's clock, so the two processes' clocks never have to agree.
ha_lease = sa.Table(
    "ha_lease",
    metadata,
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("holder", sa.String(255), nullable=False),
    sa.Column("token", sa.BigInteger(), nullable=False),
    sa.Column("acquired_ms", sa.BigInteger(), nullable=False),
    sa.Column("expires_ms", sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint("name", name="pk_ha_lease"),
)
