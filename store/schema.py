"""The one SQLAlchemy MetaData of the store; Alembic autogenerates against it.

Tables (all timestamps integer milliseconds UTC):

* ``series``   — one row per distinct metric name + label set, found by ``label_hash``.
* ``wal``      — write-ahead: one row per acknowledged batch, columnar payload, no per-series
                 index, so appending costs one small insert and one commit.
* ``chunks``   — per series, compressed blocks of samples (see :mod:`store.codec`).
* ``rollup_spans`` — per series, rollup resolution and chunk range flushed, the buckets'
                 count, sum, min, max, first, last and reset-corrected increase inside each
                 (see :mod:`store.rollup_spans`).
* ``cold_files`` — Parquet files of chunks moved to the cold tier.

Later parts of the service add their own tables to :data:`metadata`.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
)

# SQLite only makes an INTEGER PRIMARY KEY an alias of the rowid (and so autoincrementing);
# BIGINT elsewhere.
IdType = BigInteger().with_variant(Integer(), "sqlite")

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

series = Table(
    "series",
    metadata,
    Column("id", IdType, primary_key=True, autoincrement=True),
    Column("metric", String(255), nullable=False, index=True),
    Column("labels", Text, nullable=False),  # JSON object, keys sorted
    Column("label_hash", BigInteger, nullable=False, unique=True),
    Column("created_ms", BigInteger, nullable=False),
)

wal = Table(
    "wal",
    metadata,
    Column("id", IdType, primary_key=True, autoincrement=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("n", Integer, nullable=False),
    Column("payload", LargeBinary, nullable=False),
)

# An ordinary (rowid) table on purpose: in a WITHOUT ROWID table SQLite keeps at most ~1 KB of
# a row in the B-tree page and moves the rest of a blob to a mostly empty overflow page,
# which tripled the bytes per sample of chunks.
chunks = Table(
    "chunks",
    metadata,
    Column("id", IdType, primary_key=True, autoincrement=True),
    Column("series_id", BigInteger, nullable=False),
    Column("start_ms", BigInteger, nullable=False),
    Column("end_ms", BigInteger, nullable=False),
    Column("n", Integer, nullable=False),
    Column("encoding", SmallInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Index("uq_chunks_series_id_start_ms", "series_id", "start_ms", unique=True),
    Index("ix_chunks_end_ms", "end_ms"),
)

# Rollups, as spans of buckets (store.rollup_spans): one row per series, resolution and chunk
# range flushed, the buckets' aggregates packed in ``payload``. A row per bucket made the
# rollups most of a checkpoint's rows and of the file.
rollup_spans = Table(
    "rollup_spans",
    metadata,
    Column("resolution_ms", Integer, primary_key=True, autoincrement=False),
    Column("series_id", BigInteger, primary_key=True, autoincrement=False),
    Column("first_ms", BigInteger, primary_key=True, autoincrement=False),  # first bucket's start
    Column("last_ms", BigInteger, nullable=False),  # last bucket's start
    Column("n", Integer, nullable=False),  # buckets
    Column("payload", LargeBinary, nullable=False),
    # No secondary index: retention (the only reader by time alone) runs every few minutes
    # and can scan.
)

# The cold tier (store.cold_tier): one row per Parquet file of chunks moved out of ``chunks``.
# A chunk is in exactly one of the two: the row is written and the chunks deleted in one
# transaction, after the file is complete; a file no row names is left over from a crash.
cold_files = Table(
    "cold_files",
    metadata,
    Column("id", IdType, primary_key=True, autoincrement=True),
    Column("path", Text, nullable=False),
    Column("start_ms", BigInteger, nullable=False),
    Column("end_ms", BigInteger, nullable=False),
    Column("chunks", Integer, nullable=False),
    Column("samples", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Index("ix_cold_files_end_ms", "end_ms"),
)
