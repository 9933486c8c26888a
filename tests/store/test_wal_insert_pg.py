"""PostgreSQL's write-ahead insert (store.backend.PostgresBackend.insert_wal): alone in its
transaction it commits itself (one round trip); after a series insert it stays in the caller's
transaction, so the series and the samples that name it commit together or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import Engine

from store import create_store_engine
from store.backend import PostgresBackend
from tests.conftest import T0


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    engine = create_store_engine(pg_url)
    yield engine
    engine.dispose()


def wal_rows(pg_url: str) -> int:
    """Write-ahead rows as another session sees them (committed ones only)."""
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as other:
        row = other.execute("SELECT count(*) FROM wal").fetchone()
    assert row is not None
    return int(row[0])


def test_a_write_ahead_row_alone_in_its_transaction_is_committed_by_its_insert(engine: Engine, pg_url: str) -> None:
    conn: Any = engine.raw_connection()
    try:
        cur = conn.cursor()
        wal_id = PostgresBackend().insert_wal(cur, T0, 3, b"payload")
        assert wal_id > 0
        # No commit was called: the row is durable already, and no transaction is left open.
        assert wal_rows(pg_url) == 1
        assert cur.connection.info.transaction_status == TransactionStatus.IDLE
        assert cur.connection.autocommit is False  # later statements open a transaction again
        cur.execute("SELECT 1")
        assert cur.connection.info.transaction_status == TransactionStatus.INTRANS
        conn.rollback()
    finally:
        conn.close()


def test_a_write_ahead_row_after_a_new_series_commits_with_it(engine: Engine, pg_url: str) -> None:
    backend = PostgresBackend()
    conn: Any = engine.raw_connection()
    try:
        cur = conn.cursor()
        backend.insert_series(cur, [("gpu_util", '{"gpu":"0"}', 1, T0)])
        backend.insert_wal(cur, T0, 1, b"payload")
        assert wal_rows(pg_url) == 0  # still inside the caller's transaction
        conn.rollback()
        assert wal_rows(pg_url) == 0  # rolled back with the series
        backend.insert_series(cur, [("gpu_util", '{"gpu":"1"}', 2, T0)])
        backend.insert_wal(cur, T0, 1, b"payload")
        conn.commit()
        assert wal_rows(pg_url) == 1
    finally:
        conn.close()


def test_a_failed_write_ahead_insert_leaves_the_connection_as_it_was(engine: Engine, pg_url: str) -> None:
    conn: Any = engine.raw_connection()
    try:
        cur = conn.cursor()
        with pytest.raises(psycopg.errors.NotNullViolation):
            PostgresBackend().insert_wal(cur, T0, 1, None)  # type: ignore[arg-type]
        assert cur.connection.autocommit is False
        assert PostgresBackend().insert_wal(cur, T0, 1, b"payload") > 0
        assert wal_rows(pg_url) == 1
    finally:
        conn.close()
