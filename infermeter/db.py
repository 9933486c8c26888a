"""Schema migrations through Alembic, driven programmatically (`infermeter db upgrade`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

import migrations

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent
MIGRATION_LOCK = 0x1F3E_7E7E  # PostgreSQL advisory lock key held while migrating


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    return config


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Migrate to ``revision``; returns the revision the database is at afterwards."""
    config = alembic_config(engine)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Two processes of an HA pair start at once: one migrates, the other waits, then
            # finds the schema at head (the lock ends with this transaction).
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    return current_revision(engine)


def is_at_head(engine: Engine) -> bool:
    return current_revision(engine) == head_revision(engine)
