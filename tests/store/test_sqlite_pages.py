"""A new SQLite store gets 16 KiB pages (chunk rows pack tighter); a store created with 4 KiB
pages keeps them and goes on working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, text

import store.checkpoint as checkpoint_module
from infermeter import db
from store import ManualClock, Reader, SampleBatch, Selector, SeriesKey, StoreOptions, TimeSeriesStore
from store.engine import READER_CACHE_KIB, SQLITE_PAGE_SIZE, WRITER_CACHE_KIB, create_store_engine
from tests.conftest import T0

KEY = SeriesKey.of("gpu_power_watts", gpu="0")


def page_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


def append_twenty(store: TimeSeriesStore) -> None:
    """Twenty samples of one series, 15 s apart, valued 0..19."""
    ts = T0 + np.arange(20, dtype=np.int64) * 15_000
    store.append(SampleBatch([KEY], np.zeros(20, np.int64), ts, np.arange(20, dtype=np.float64)))


def round_trip(path: Path) -> list[float]:
    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    store = TimeSeriesStore(engine, ManualClock(T0), StoreOptions())
    store.open()
    try:
        append_twenty(store)
        store.checkpoint(force=True)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM chunks")).scalar_one() == 1
        (series,) = Reader(store).raw(Selector("gpu_power_watts"), 0, 2**62)
        return series.values.tolist()
    finally:
        store.close()
        engine.dispose()


def test_a_new_store_has_16_kib_pages(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    assert round_trip(path) == list(range(20))
    assert page_size(path) == SQLITE_PAGE_SIZE == 16_384


def test_an_existing_4_kib_store_keeps_its_pages_and_works(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE earlier (x INTEGER)")  # a database with a table: its page size is fixed
    assert round_trip(path) == list(range(20))
    assert page_size(path) == 4096


def cache_kib(conn: object) -> int:
    cur = conn.cursor()  # type: ignore[attr-defined]
    cur.execute("PRAGMA cache_size")
    (size,) = cur.fetchone()
    cur.close()
    return -int(size)


@pytest.mark.parametrize("background", [True, False])
def test_only_the_connection_that_checkpoints_gets_the_large_page_cache(tmp_path: Path, background: bool) -> None:
    """A pool of readers at the writer's 64 MiB each could hold hundreds of MiB of pages; so
    so could the append connection where a background thread checkpoints: it then writes
    write-ahead rows and new series, and pages it wrote stayed cached though nothing read them."""
    engine = create_store_engine(f"sqlite:///{tmp_path / 'store.db'}")
    db.upgrade(engine)
    store = TimeSeriesStore(engine, ManualClock(T0), StoreOptions(background_checkpoints=background))
    store.open()
    try:
        if background:
            assert store.background is not None
            assert cache_kib(store.background._conn) == WRITER_CACHE_KIB
            assert cache_kib(store._conn) == READER_CACHE_KIB
        else:
            assert store.background is None
            assert cache_kib(store._conn) == WRITER_CACHE_KIB
        reader = engine.raw_connection()
        try:
            assert cache_kib(reader) == READER_CACHE_KIB < WRITER_CACHE_KIB
        finally:
            reader.close()
    finally:
        store.close()
        engine.dispose()


def background_store(path: Path) -> tuple[Engine, TimeSeriesStore]:
    """An open store on a new SQLite file whose checkpoints run on a background thread."""
    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    store = TimeSeriesStore(engine, ManualClock(T0), StoreOptions(background_checkpoints=True))
    store.open()
    return engine, store


def watch_inline_checkpoints(store: TimeSeriesStore, monkeypatch: pytest.MonkeyPatch, fail_at: int = 0) -> list[int]:
    """The append connection's page cache (KiB) as each inline checkpoint starts; the
    ``fail_at``-th one (counting from 1) raises instead of writing."""
    seen: list[int] = []
    real = checkpoint_module.run_checkpoint

    def watched(*args: object, **kw: object) -> tuple[int, int]:
        seen.append(cache_kib(store._conn))
        if len(seen) == fail_at:
            raise RuntimeError("disk gone")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpoint_module, "run_checkpoint", watched)
    return seen


def test_an_inline_checkpoint_beside_a_background_thread_gets_the_writer_cache_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forced checkpoint (a stop, the API's) runs on the append connection: the writer's page
    cache while it writes chunks, a reader's again after -- also when it fails."""
    engine, store = background_store(tmp_path / "store.db")
    seen = watch_inline_checkpoints(store, monkeypatch, fail_at=2)
    try:
        append_twenty(store)
        assert store.checkpoint(force=True) == 20
        assert seen == [WRITER_CACHE_KIB]
        assert cache_kib(store._conn) == READER_CACHE_KIB
        with pytest.raises(RuntimeError, match="disk gone"):
            store.checkpoint(force=True)
        assert cache_kib(store._conn) == READER_CACHE_KIB
        (series,) = Reader(store).raw(Selector("gpu_power_watts"), 0, 2**62)
        assert series.values.tolist() == list(range(20))
    finally:
        monkeypatch.undo()
        store.close()
        engine.dispose()


def test_the_stop_checkpoint_after_the_background_thread_ended_gets_the_writer_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop ends the background thread first, then checkpoints on the append connection: that
    checkpoint, the largest inline one, writes with the writer's page cache too."""
    engine, store = background_store(tmp_path / "store.db")
    seen = watch_inline_checkpoints(store, monkeypatch)
    try:
        append_twenty(store)
    finally:
        store.close()  # checkpoint_on_close: every sample into chunks
    monkeypatch.undo()
    assert seen == [WRITER_CACHE_KIB]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 20
    engine.dispose()
