"""rollups as spans of buckets: one row per series, resolution and chunk range

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05

Existing rollup rows are packed into spans of up to two hours of buckets (any grouping reads
the same; new checkpoints write one span per chunk range flushed). The payload layout is the
one of ``store.rollup_spans`` at this revision (column by column: bucket steps and counts as
int32, six float64 aggregates; deflated), written out here so that this migration keeps
meaning what it meant. The downgrade also reads the Zstandard frames that later checkpoints
write (the same columns; ``store.rollup_spans`` since Zstandard).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import sqlalchemy as sa
import zstandard
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_FLOATS = ("sum", "min", "max", "first", "last", "inc")
_WINDOW_MS = 7_200_000
_SERIES_PER_PASS = 2_000
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_spans = sa.table(
    "rollup_spans",
    sa.column("resolution_ms", sa.Integer()), sa.column("series_id", sa.BigInteger()),
    sa.column("first_ms", sa.BigInteger()), sa.column("last_ms", sa.BigInteger()),
    sa.column("n", sa.Integer()), sa.column("payload", sa.LargeBinary()),
)
_rows = sa.table(
    "rollups",
    sa.column("resolution_ms", sa.Integer()), sa.column("series_id", sa.BigInteger()),
    sa.column("bucket_ms", sa.BigInteger()), sa.column("count", sa.Integer()),
    *(sa.column(name, sa.Double()) for name in _FLOATS),
)


def _create_spans() -> None:
    op.create_table(
        "rollup_spans",
        sa.Column("resolution_ms", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.BigInteger(), nullable=False),
        sa.Column("first_ms", sa.BigInteger(), nullable=False),
        sa.Column("last_ms", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("resolution_ms", "series_id", "first_ms", name="pk_rollup_spans"),
    )
    if op.get_bind().dialect.name == "postgresql":  # random float bytes: no TOAST compression attempt
        op.execute("ALTER TABLE rollup_spans ALTER COLUMN payload SET STORAGE EXTERNAL")


def _create_rows() -> None:
    op.create_table(
        "rollups",
        sa.Column("resolution_ms", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.BigInteger(), nullable=False),
        sa.Column("bucket_ms", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.Double(), nullable=False) for name in _FLOATS),
        sa.PrimaryKeyConstraint("resolution_ms", "series_id", "bucket_ms", name="pk_rollups"),
        sqlite_with_rowid=False,
    )


def _passes(conn: Any, table: Any) -> Iterator[tuple[int, int, int]]:
    """(resolution, lowest id, highest id) of each pass over ``_SERIES_PER_PASS`` series."""
    for (resolution,) in conn.execute(sa.select(table.c.resolution_ms).distinct()).all():
        ids = [int(i) for (i,) in conn.execute(
            sa.select(table.c.series_id).where(table.c.resolution_ms == resolution).distinct()
            .order_by(table.c.series_id)
        ).all()]
        for at in range(0, len(ids), _SERIES_PER_PASS):
            part = ids[at : at + _SERIES_PER_PASS]
            yield int(resolution), part[0], part[-1]


def upgrade() -> None:
    _create_spans()
    conn = op.get_bind()
    for resolution, lo, hi in list(_passes(conn, _rows)):
        got = conn.execute(
            sa.select(_rows.c.series_id, _rows.c.bucket_ms, _rows.c.count, *(_rows.c[n] for n in _FLOATS))
            .where(_rows.c.resolution_ms == resolution, _rows.c.series_id.between(lo, hi))
            .order_by(_rows.c.series_id, _rows.c.bucket_ms)
        ).all()
        if not got:
            continue
        table = np.asarray(got, dtype=np.float64)
        sid = table[:, 0].astype(np.int64)
        bucket = table[:, 1].astype(np.int64)
        window = bucket // _WINDOW_MS
        new_span = np.append(True, (sid[1:] != sid[:-1]) | (window[1:] != window[:-1]))
        starts = np.flatnonzero(new_span)
        ends = np.append(starts[1:], len(sid))
        steps = np.zeros(len(sid), "<i4")
        steps[1:] = np.where(new_span[1:], 0, (bucket[1:] - bucket[:-1]) // resolution)
        counts = table[:, 2].astype("<i4")
        floats = np.ascontiguousarray(table[:, 3:].T, dtype="<f8")
        conn.execute(_spans.insert(), [
            {"resolution_ms": resolution, "series_id": s, "first_ms": f, "last_ms": last, "n": b - a,
             "payload": zlib.compress(steps[a:b].tobytes() + counts[a:b].tobytes() + floats[:, a:b].tobytes(), 1)}
            for s, f, last, a, b in zip(sid[starts].tolist(), bucket[starts].tolist(), bucket[ends - 1].tolist(),
                                        starts.tolist(), ends.tolist())
        ])
    op.drop_table("rollups")


def downgrade() -> None:
    _create_rows()
    conn = op.get_bind()
    for resolution, lo, hi in list(_passes(conn, _spans)):
        got = conn.execute(
            sa.select(_spans.c.series_id, _spans.c.first_ms, _spans.c.n, _spans.c.payload)
            .where(_spans.c.resolution_ms == resolution, _spans.c.series_id.between(lo, hi))
        ).all()
        if not got:
            continue
        out = []
        unpacker = zstandard.ZstdDecompressor()
        for s, first, n, payload in got:
            packed = bytes(payload)
            raw = unpacker.decompress(packed) if packed[:4] == _ZSTD_MAGIC else zlib.decompress(packed)
            offset = np.cumsum(np.frombuffer(raw, "<i4", n).astype(np.int64))
            counts = np.frombuffer(raw, "<i4", n, 4 * n).tolist()
            floats = np.frombuffer(raw, "<f8", len(_FLOATS) * n, 8 * n).reshape(len(_FLOATS), n).tolist()
            for j, bucket in enumerate((first + offset * resolution).tolist()):
                out.append({"resolution_ms": resolution, "series_id": s, "bucket_ms": bucket, "count": counts[j],
                            **{name: floats[i][j] for i, name in enumerate(_FLOATS)}})
        conn.execute(_rows.insert(), out)
    op.drop_table("rollup_spans")
