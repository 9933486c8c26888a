"""The few statements on the hot path, per dialect, on raw DB-API connections.

SQLAlchemy builds the schema and runs everything cold; samples never go through it, because
its per-statement overhead would cost more than the write (see DESIGN.md). Above this module
there is one code path: callers hand over rows and never see which database is underneath.
SQLite gets ``executemany`` in one transaction; PostgreSQL gets binary ``COPY``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import sqlalchemy as sa
from psycopg.pq import TransactionStatus

from store import schema
from store.engine import READER_CACHE_KIB, WRITER_CACHE_KIB

Row = Sequence[Any]

CHUNK_COLUMNS = ("series_id", "start_ms", "end_ms", "n", "encoding", "data")
SERIES_COLUMNS = ("metric", "labels", "label_hash", "created_ms")


class Backend(Protocol):
    name: str
    param: str

    def insert_series(self, cur: Any, rows: Sequence[Row]) -> list[int]: ...

    def insert_wal(self, cur: Any, created_ms: int, n: int, payload: bytes) -> int:
        """Insert one write-ahead row; returns its id. Where it is the transaction's only
        statement it may commit itself; the caller commits after it all the same."""
        ...

    def bulk_insert(self, cur: Any, table: str, columns: Sequence[str], rows: Iterable[Row]) -> None: ...

    def tune_writer(self, conn: Any, writing: bool = True) -> None:
        """Settings of a connection that writes chunks and rollups (the one that checkpoints;
        ``conn`` is a raw DBAPI connection), or, ``writing`` False, back to a reader's."""


@contextmanager
def writer_cache(backend: Backend, conn: Any, lent: bool) -> Iterator[None]:
    """The writer's settings on ``conn`` for a checkpoint; ``lent``: only while it runs (the
    append connection, which keeps a reader's page cache where a background thread checkpoints)."""
    if lent:
        backend.tune_writer(conn)
    try:
        yield
    finally:
        if lent:
            backend.tune_writer(conn, writing=False)


class SqliteBackend:
    name = "sqlite"
    param = "?"

    def insert_series(self, cur: Any, rows: Sequence[Row]) -> list[int]:
        ids = []
        for row in rows:
            cur.execute(
                "INSERT INTO series (metric, labels, label_hash, created_ms) VALUES (?, ?, ?, ?)", row
            )
            ids.append(int(cur.lastrowid))
        return ids

    def insert_wal(self, cur: Any, created_ms: int, n: int, payload: bytes) -> int:
        cur.execute("INSERT INTO wal (created_ms, n, payload) VALUES (?, ?, ?)", (created_ms, n, payload))
        return int(cur.lastrowid)

    def bulk_insert(self, cur: Any, table: str, columns: Sequence[str], rows: Iterable[Row]) -> None:
        marks = ", ".join("?" * len(columns))
        quoted = ", ".join(f'"{c}"' for c in columns)
        cur.executemany(f"INSERT INTO {table} ({quoted}) VALUES ({marks})", rows)

    def tune_writer(self, conn: Any, writing: bool = True) -> None:
        """The writer's page cache: checkpoints insert chunk and rollup rows all over the
        B-trees, and a reader's small cache turns that into re-reads. Set back to a reader's,
        SQLite frees the pages past it."""
        cur = conn.cursor()
        try:
            cur.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB if writing else READER_CACHE_KIB}")
        finally:
            cur.close()


class PostgresBackend:
    name = "postgresql"
    param = "%s"

    def insert_series(self, cur: Any, rows: Sequence[Row]) -> list[int]:
        ids = []
        for row in rows:
            cur.execute(
                "INSERT INTO series (metric, labels, label_hash, created_ms) "
                "VALUES (%s, %s, %s, %s) RETURNING id",
                row,
            )
            ids.append(int(cur.fetchone()[0]))
        return ids

    def insert_wal(self, cur: Any, created_ms: int, n: int, payload: bytes) -> int:
        """Where nothing else is in the transaction yet (no series created by this append, the
        steady state), the insert runs as a transaction of its own: one round trip to the
        server instead of three (BEGIN, INSERT, COMMIT), and the caller's commit finds nothing
        to do. The server answers only once the commit is flushed, as an explicit COMMIT
        would (``synchronous_commit``). 2,000 appends of 1,000 samples acknowledged in
        1.15-1.22 s instead of 1.43-1.60 s (``benchmarks.store_bench --sections ingest``)."""
        conn = cur.connection
        alone = conn.info.transaction_status == TransactionStatus.IDLE
        if alone:
            conn.autocommit = True
        try:
            cur.execute(
                # %b sends the payload in binary; as text it would double in size and be parsed.
                "INSERT INTO wal (created_ms, n, payload) VALUES (%s, %s, %b) RETURNING id",
                (created_ms, n, payload),
            )
        finally:
            if alone:
                conn.autocommit = False
        return int(cur.fetchone()[0])

    def bulk_insert(self, cur: Any, table: str, columns: Sequence[str], rows: Iterable[Row]) -> None:
        quoted = ", ".join(f'"{c}"' for c in columns)
        types = [_pg_type(table, c) for c in columns]
        with cur.copy(f"COPY {table} ({quoted}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)

    def tune_writer(self, conn: Any, writing: bool = True) -> None:
        """Nothing: PostgreSQL's buffers are the server's, shared by every connection."""


def _pg_type(table: str, column: str) -> str:
    """The binary COPY type of a column, read from :mod:`store.schema` (one description of the
    tables, not a second one here to keep in step)."""
    kind = schema.metadata.tables[table].c[column].type
    for sa_type, pg in _PG_NAMES:  # most specific first: BigInteger is an Integer
        if isinstance(kind, sa_type):
            return pg
    raise TypeError(f"{table}.{column}: no binary COPY type for {kind!r}")


_PG_NAMES: tuple[tuple[type[Any], str], ...] = (
    (sa.BigInteger, "int8"),
    (sa.SmallInteger, "int2"),
    (sa.Integer, "int4"),
    (sa.Float, "float8"),
    (sa.LargeBinary, "bytea"),
)


def backend_for(dialect_name: str) -> Backend:
    if dialect_name == "sqlite":
        return SqliteBackend()
    if dialect_name == "postgresql":
        return PostgresBackend()
    raise ValueError(f"unsupported database dialect {dialect_name!r} (use sqlite or postgresql+psycopg)")
