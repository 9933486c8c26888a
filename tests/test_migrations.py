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


def test_rollup_rows_become_spans_and_back_unchanged(empty_url: str) -> None:
    """0011 packs every rollup row into spans (store.rollup_spans) and its downgrade unpacks
    them: the buckets read back are the rows written, bit for bit, at both resolutions."""
    import numpy as np
    import sqlalchemy as sa
    from alembic import command

    from store.rollup_spans import frame_of_spans

    engine = create_store_engine(empty_url)
    db.upgrade(engine, "0010")
    minute, hour, t0 = 60_000, 3_600_000, 1_764_547_200_000
    rng = np.random.default_rng(3)
    rows = []
    for resolution, buckets in ((minute, 300), (hour, 30)):
        for sid in (1, 2, 2_500):  # ids far apart: more than one migration pass
            for k in sorted(rng.choice(buckets * 2, buckets, replace=False).tolist()):  # with gaps
                rows.append({"resolution_ms": resolution, "series_id": sid, "bucket_ms": t0 + k * resolution,
                             "count": int(rng.integers(1, 60)),
                             **{c: float(rng.normal()) for c in ("sum", "min", "max", "first", "last", "inc")}})
    columns = ", ".join(f'"{c}"' for c in rows[0])
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO rollups ({columns}) VALUES ({', '.join(':' + c for c in rows[0])})"), rows)
    db.upgrade(engine)
    with engine.connect() as conn:
        for resolution in (minute, hour):
            spans = conn.execute(sa.text(
                "SELECT series_id, first_ms, n, payload FROM rollup_spans WHERE resolution_ms = :r "
                "ORDER BY series_id, first_ms"), {"r": resolution}).all()
            frame = frame_of_spans([tuple(s) for s in spans], resolution)
            mine = [r for r in rows if r["resolution_ms"] == resolution]
            assert frame.sid.tolist() == [r["series_id"] for r in mine]
            assert frame.bucket.tolist() == [r["bucket_ms"] for r in mine]
            assert frame.count.tolist() == [r["count"] for r in mine]
            for c in ("sum", "min", "max", "first", "last", "inc"):
                assert getattr(frame, c).tolist() == [r[c] for r in mine], c
    config = db.alembic_config(engine)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0010")
    with engine.connect() as conn:
        back = [dict(r._mapping) for r in conn.execute(sa.text(
            f"SELECT {columns} FROM rollups ORDER BY resolution_ms, series_id, bucket_ms"))]
    assert back == rows
    engine.dispose()


def test_the_downgrade_unpacks_spans_that_checkpoints_wrote_with_zstandard(tmp_path: Path) -> None:
    """Spans a checkpoint writes now are Zstandard frames; 0011's downgrade reads them too."""
    import numpy as np
    import sqlalchemy as sa
    from alembic import command

    from store.rollup import Frame
    from store.rollup_spans import SPAN_COLUMNS, span_rows

    engine = create_store_engine(f"sqlite:///{tmp_path / 'spans.db'}")
    db.upgrade(engine, "0011")
    minute, t0, n = 60_000, 1_764_547_200_000, 150
    rng = np.random.default_rng(5)
    values = [rng.normal(size=n) for _ in range(6)]
    frame = Frame(np.full(n, 7, np.int64), t0 + np.arange(n) * minute, rng.integers(1, 60, n), *values)
    spans = span_rows(minute, frame, 7_200_000)
    assert len(spans) == 2 and all(s[5][:4] == b"\x28\xb5\x2f\xfd" for s in spans)
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO rollup_spans ({', '.join(SPAN_COLUMNS)}) VALUES "
                             f"({', '.join(':' + c for c in SPAN_COLUMNS)})"),
                     [dict(zip(SPAN_COLUMNS, s)) for s in spans])
    config = db.alembic_config(engine)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0010")
    with engine.connect() as conn:
        back = conn.execute(sa.text('SELECT bucket_ms, "count", "sum", "inc" FROM rollups ORDER BY bucket_ms')).all()
    assert [r[0] for r in back] == frame.bucket.tolist()
    assert [r[1] for r in back] == frame.count.tolist()
    assert [r[2] for r in back] == values[0].tolist() and [r[3] for r in back] == values[5].tolist()
    engine.dispose()
