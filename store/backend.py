"""The few statements on the hot path, per dialect, on raw DB-API connections.

SQLAlchemy builds the schema and runs everything cold; samples never go through it, because
its per-statement overhead would cost more than the write (see DESIGN.md). Above this module
there is one code path: callers hand over rows and never see which database is underneath.
SQLite gets ``executemany`` in one transaction; PostgreSQL gets binary ``COPY``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from store.rollup import FIELDS, Frame

Row = Sequence[Any]

CHUNK_COLUMNS = ("series_id", "start_ms", "end_ms", "n", "encoding", "data")
ROLLUP_COLUMNS = (
    "resolution_ms", "series_id", "bucket_ms", "count", "sum", "min", "max", "first", "last", "inc"
)
SERIES_COLUMNS = ("metric", "labels", "label_hash", "created_ms")


class Backend(Protocol):
    name: str
    param: str

    def insert_series(self, cur: Any, rows: Sequence[Row]) -> list[int]: ...

    def insert_wal(self, cur: Any, created_ms: int, n: int, payload: bytes) -> int: ...

    def bulk_insert(self, cur: Any, table: str, columns: Sequence[str], rows: Iterable[Row]) -> None: ...

    def insert_rollups(self, cur: Any, resolution_ms: int, frame: Frame) -> None: ...


_ROWS_PER_STATEMENT = 100  # x 9 parameters, far below SQLite's limit of 32766


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

    def insert_rollups(self, cur: Any, resolution_ms: int, frame: Frame) -> None:
        # Many rows per statement: a third cheaper than one row per step, because SQLite's
        # per-statement work (step, reset, clear bindings) is what remains after binding.
        n = len(frame)
        if n == 0:
            return
        columns = [getattr(frame, name).tolist() for name in FIELDS]
        flat = list(itertools.chain.from_iterable(zip(*columns)))
        width = len(FIELDS)
        row = f"({int(resolution_ms)}, {', '.join('?' * width)})"
        head = f"INSERT INTO rollups ({', '.join(_quoted(ROLLUP_COLUMNS))}) VALUES "
        full = n // _ROWS_PER_STATEMENT * _ROWS_PER_STATEMENT
        if full:
            step = _ROWS_PER_STATEMENT * width
            cur.executemany(
                head + ", ".join([row] * _ROWS_PER_STATEMENT),
                (flat[i : i + step] for i in range(0, full * width, step)),
            )
        if full < n:
            cur.execute(head + ", ".join([row] * (n - full)), flat[full * width :])


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
        cur.execute(
            # %b sends the payload in binary; as text it would double in size and be parsed.
            "INSERT INTO wal (created_ms, n, payload) VALUES (%s, %s, %b) RETURNING id",
            (created_ms, n, payload),
        )
        return int(cur.fetchone()[0])

    def bulk_insert(self, cur: Any, table: str, columns: Sequence[str], rows: Iterable[Row]) -> None:
        quoted = ", ".join(f'"{c}"' for c in columns)
        types = [_PG_TYPES[(table, c)] for c in columns]
        with cur.copy(f"COPY {table} ({quoted}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)

    def insert_rollups(self, cur: Any, resolution_ms: int, frame: Frame) -> None:
        """Binary COPY built by numpy in one go: every rollup field has a fixed width."""
        n = len(frame)
        if n == 0:
            return
        rows = np.empty(n, dtype=_PG_ROLLUP_ROW)
        rows["nfields"] = len(ROLLUP_COLUMNS)
        for name, _ in _PG_ROLLUP_FIELDS:
            rows[f"{name}_len"] = 4 if name in ("resolution_ms", "count") else 8
        rows["resolution_ms"] = resolution_ms
        for name in FIELDS:
            rows[name] = getattr(frame, name)
        body = _PG_COPY_HEADER + rows.tobytes() + b"\xff\xff"
        with cur.copy(f"COPY rollups ({', '.join(_quoted(ROLLUP_COLUMNS))}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(body)


_PG_TYPES = {
    ("chunks", "series_id"): "int8",
    ("chunks", "start_ms"): "int8",
    ("chunks", "end_ms"): "int8",
    ("chunks", "n"): "int4",
    ("chunks", "encoding"): "int2",
    ("chunks", "data"): "bytea",
    ("rollups", "resolution_ms"): "int4",
    ("rollups", "series_id"): "int8",
    ("rollups", "bucket_ms"): "int8",
    ("rollups", "count"): "int4",
    **{("rollups", c): "float8" for c in ("sum", "min", "max", "first", "last", "inc")},
}


def _quoted(columns: Sequence[str]) -> list[str]:
    return [f'"{c}"' for c in columns]


# PostgreSQL's binary COPY: a signature, flags and header extension, then per row a 16-bit
# field count and per field a 32-bit length and the value, all big-endian.
_PG_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
_PG_ROLLUP_FIELDS = [
    ("resolution_ms", ">i4"),
    ("sid", ">i8"),
    ("bucket", ">i8"),
    ("count", ">i4"),
    *((name, ">f8") for name in ("sum", "min", "max", "first", "last", "inc")),
]
_PG_ROLLUP_ROW = np.dtype(
    [("nfields", ">i2")]
    + [item for name, kind in _PG_ROLLUP_FIELDS for item in ((f"{name}_len", ">i4"), (name, kind))]
)


def backend_for(dialect_name: str) -> Backend:
    if dialect_name == "sqlite":
        return SqliteBackend()
    if dialect_name == "postgresql":
        return PostgresBackend()
    raise ValueError(f"unsupported database dialect {dialect_name!r} (use sqlite or postgresql+psycopg)")
