"""Alembic: empty SQLite and PostgreSQL databases migrate to head with no drift from the models."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from infermeter import db
from migrations.metadata import ALL_METADATA
from store import create_store_engine
from tests.conftest import PG_ADMIN, _pg_url


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    name = f"im_mig_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield _pg_url(name)
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_upgrade_to_head_without_drift(empty_url: str) -> None:
    engine = create_store_engine(empty_url)
    assert db.current_revision(engine) is None
    assert not db.is_at_head(engine)
    assert db.upgrade(engine) == db.head_revision(engine)
    assert db.is_at_head(engine)
    with engine.connect() as conn:
        drift = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), ALL_METADATA)
    assert drift == []
    # idempotent, and reversible
    assert db.upgrade(engine) == db.head_revision(engine)
    from alembic import command

    config = db.alembic_config(engine)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "base")
    assert db.current_revision(engine) is None
    engine.dispose()


def test_db_upgrade_cli(tmp_path: Path) -> None:
    from io import StringIO

    from infermeter.cli import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"store:\n  url: sqlite:///{tmp_path / 'cli.db'}\n")
    out, err = StringIO(), StringIO()
    assert main(["--config", str(cfg), "db", "upgrade"], out, err) == 0
    head = db.head_revision(create_store_engine(f"sqlite:///{tmp_path / 'cli.db'}"))
    assert head is not None and f"database at revision {head}" in out.getvalue()
