"""Shared fixtures: real SQLite files and real PostgreSQL databases (127.0.0.1:5432).

PostgreSQL tests create a throwaway database per test from a migrated template, and drop it
afterwards. The server must be running (`.ci/run` starts it); a missing server fails loudly
rather than skipping, so a green run always means both backends were exercised.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine

from infermeter import db
from store import ManualClock, StoreOptions, TimeSeriesStore, create_store_engine

PG_ADMIN = os.environ.get("INFERMETER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z, on an hour boundary


def _pg_url(name: str) -> str:
    base = PG_ADMIN.rsplit("/", 1)[0]
    return f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(PG_ADMIN, autocommit=True)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    name = f"im_tmpl_{uuid.uuid4().hex[:10]}"
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    engine = create_store_engine(_pg_url(name))
    db.upgrade(engine)
    engine.dispose()
    yield name
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    name = f"im_test_{uuid.uuid4().hex[:10]}"
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    yield _pg_url(name)
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = create_store_engine(url)
    db.upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A migrated, empty database on each backend."""
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


StoreFactory = Callable[..., TimeSeriesStore]


@pytest.fixture
def make_store(store_url: str, clock: ManualClock) -> Iterator[StoreFactory]:
    """Opens stores on the test's database; every one is closed (without flushing) at the end."""
    opened: list[tuple[TimeSeriesStore, Engine]] = []

    def factory(options: StoreOptions | None = None, *, read_only: bool = False) -> TimeSeriesStore:
        engine = create_store_engine(store_url)
        store = TimeSeriesStore(engine, clock, options or StoreOptions(), read_only=read_only)
        store.open()
        opened.append((store, engine))
        return store

    yield factory
    for store, engine in opened:
        store.close(flush=False)
        engine.dispose()
