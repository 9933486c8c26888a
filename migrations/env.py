"""Alembic environment: runs on a connection handed over by `infermeter.db` (or a URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from migrations.metadata import ALL_METADATA

config = context.config
target_metadata = ALL_METADATA


def _run(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode rebuilds tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "sqlite:///./data/infermeter.db")
    with engine.begin() as conn:
        _run(conn)
