"""Background checkpoints on SQLite, one writer per database: each slice commits on its own, a
checkpoint that dies between slices loses and doubles nothing, a rollup read that a commit
overlaps is read again (both backends), late checkpoints cut chunk-range chunks, and the WAL file
is checkpointed by the background thread, not inside appends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from store import ManualClock, RangeQuery, Reader, Selector, StoreOptions, TimeSeriesStore
from store import background as background_module
from store.engine import SQLITE_AUTOCHECKPOINT_PAGES, create_store_engine
from tests.conftest import T0
from tests.store.background_support import HOUR, KEYS, MIN, every_sample, opened, scrape, wait_for

__all__ = ["opened"]  # the fixture, used by name


def counted(store: TimeSeriesStore, start: int, end: int) -> tuple[float, int]:
    """Samples in [start, end) of every series: counted from hourly rollups plus the head's
    tail (the read a checkpoint can race), and from the raw samples."""
    reader = Reader(store)
    rolled = reader.range(RangeQuery(Selector("gpu_util"), start, end - 1, HOUR, "count"))  # hours from start
    assert rolled and all(r.source.startswith("rollup") for r in rolled)
    raw = sum(int(((s.ts_ms >= start) & (s.ts_ms < end)).sum()) for s in reader.raw(Selector("gpu_util"), start, end))
    return float(sum(np.nansum(r.values) for r in rolled)), raw


def _fixed_slices(monkeypatch: pytest.MonkeyPatch, samples: int) -> None:
    """Every slice of a background checkpoint this many samples, whatever the time it takes."""
    monkeypatch.setattr(background_module, "BACKGROUND_SLICE_SAMPLES", samples)
    monkeypatch.setattr(background_module, "BACKGROUND_SLICE_MOST", samples)


def test_on_sqlite_each_slice_commits_on_its_own_and_reads_meanwhile_are_exact(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_slices(monkeypatch, 120)  # one series a slice
    store = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(T0),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    store.open()
    real_after = background_module.SlicePublisher.after
    third, release = threading.Event(), threading.Event()
    slices: list[int] = []

    def held_after(self: Any, sids: Any) -> None:
        real_after(self, sids)
        slices.append(len(set(sids.tolist())))
        if len(slices) == 3:
            third.set()
            assert release.wait(20)

    monkeypatch.setattr(background_module.SlicePublisher, "after", held_after)
    try:
        start = T0 - T0 % (2 * HOUR)
        times = [start + i * MIN for i in range(126)]
        for i, ts in enumerate(times):
            scrape(store, ts, float(i))
        assert third.wait(20)
        # Three slices committed (their own transactions): the rest is not written yet.
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT COALESCE(SUM(n), 0) FROM chunks")).scalar_one() == 3 * 120
        began = time.perf_counter()
        assert scrape(store, times[-1] + MIN, 126.0).accepted == len(KEYS)  # not held by the checkpoint
        assert time.perf_counter() - began < 2
        # Three series read their first two hours from rollups, the rest from the head.
        rolled, raw = counted(store, start, start + 3 * HOUR)
        assert rolled == raw == 127 * len(KEYS)
        release.set()
        wait_for(lambda: store.stats["checkpoints"] == 1)
        assert slices == [1] * len(KEYS)
        assert counted(store, start, start + 3 * HOUR) == (127 * len(KEYS), 127 * len(KEYS))
        expected = ([*times, times[-1] + MIN], [float(i) for i in range(127)])
        assert all(v == expected for v in every_sample(store).values())
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 120 * len(KEYS)
    finally:
        release.set()
        store.close(flush=False)  # as if killed
    again = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(times[-1]), StoreOptions())
    again.open()
    try:
        assert all(v == expected for v in every_sample(again).values())
    finally:
        again.close(flush=False)


def test_a_sqlite_checkpoint_killed_between_slices_loses_and_doubles_nothing(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices committed before the process died keep their chunks; replay takes from the
    write-ahead rows only what is past them, and the next checkpoint writes the rest once."""
    _fixed_slices(monkeypatch, 120)
    store = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(T0),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    store.open()
    real_after = background_module.SlicePublisher.after
    died = threading.Event()

    def dying_after(self: Any, sids: Any) -> None:
        if died.is_set():  # dies here: the slice in progress is rolled back, nothing more is written
            raise RuntimeError("killed between slices")
        real_after(self, sids)
        if self.plan.samples == 5 * 120:  # the sixth slice written and committed (counted after this)
            died.set()

    monkeypatch.setattr(background_module.SlicePublisher, "after", dying_after)
    start = T0 - T0 % (2 * HOUR)
    times = [start + i * MIN for i in range(126)]
    for i, ts in enumerate(times):
        scrape(store, ts, float(i))
    wait_for(died.is_set)
    time.sleep(0.2)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 6 * 120  # six slices committed
        assert conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one() == 126  # every write-ahead row kept
    store.close(flush=False)
    monkeypatch.undo()
    again = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(times[-1]),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    again.open()
    try:
        expected = ([*times], [float(i) for i in range(126)])
        assert all(v == expected for v in every_sample(again).values())
        again.checkpoint(force=True)
        with again.engine.connect() as conn:
            assert conn.execute(text("SELECT SUM(n) FROM chunks")).scalar_one() == 126 * len(KEYS)
            assert conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one() == 0
            assert conn.execute(text("SELECT COUNT(DISTINCT series_id || '-' || start_ms) FROM chunks")).scalar_one() == \
                conn.execute(text("SELECT COUNT(*) FROM chunks")).scalar_one()
        assert all(v == expected for v in every_sample(again).values())
        assert counted(again, start, start + 3 * HOUR) == (126 * len(KEYS), 126 * len(KEYS))
    finally:
        again.close(flush=False)


def test_a_rollup_read_that_a_commit_overlaps_is_read_again(opened: Callable[..., TimeSeriesStore],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint commits between the read's snapshot of the head and its rollup rows: the
    read sees the marks moved and reads again instead of counting those samples twice."""
    store = opened(ManualClock(T0), background=False)
    start = T0 - T0 % (2 * HOUR)
    for i in range(90):
        scrape(store, start + i * MIN, float(i))
    store.checkpoint(force=True)
    for i in range(90, 150):
        scrape(store, start + i * MIN, float(i))
    real_snapshot = store.head_snapshot
    snapshots: list[int] = []

    def racing_snapshot(*args: Any) -> Any:
        snap = real_snapshot(*args)
        snapshots.append(1)
        if len(snapshots) == 1:
            store.checkpoint(force=True)  # commits the rows of the head's tail the snapshot holds
        return snap

    monkeypatch.setattr(store, "head_snapshot", racing_snapshot)
    rolled = Reader(store).range(RangeQuery(Selector("gpu_util"), start, start + 3 * HOUR - 1, HOUR, "count"))
    assert len(snapshots) == 2  # the first read raced the commit and was read again
    assert all(r.values.tolist() == [60.0, 60.0, 30.0] for r in rolled) and len(rolled) == len(KEYS)
    assert counted(store, start, start + 3 * HOUR) == (150 * len(KEYS), 150 * len(KEYS))


def test_a_late_checkpoint_writes_one_chunk_per_series_and_chunk_range(opened: Callable[..., TimeSeriesStore],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that runs hours late (behind a backfill, after a restart) cuts the same
    2 h chunks as checkpoints at every boundary would have: cold-tier moves and chunk reads
    do not depend on when checkpoints ran."""
    store = opened(ManualClock(T0), background=False)
    monkeypatch.setattr(store, "_maybe_checkpoint", lambda: None)  # nothing checkpoints until asked
    start = T0 - T0 % (2 * HOUR)
    for i in range(7 * 60):  # seven hours a minute apart
        scrape(store, start + i * MIN, float(i))
    assert store.checkpoint(force=True) == 7 * 60 * len(KEYS)
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT series_id, start_ms, end_ms, n FROM chunks ORDER BY series_id, start_ms")).all()
    per_series = [(r.start_ms - start, r.end_ms - start, r.n) for r in rows if r.series_id == rows[0].series_id]
    assert per_series == [(0, 2 * HOUR - MIN, 120), (2 * HOUR, 4 * HOUR - MIN, 120), (4 * HOUR, 6 * HOUR - MIN, 120),
                          (6 * HOUR, 7 * HOUR - MIN, 60)]
    assert len(rows) == 4 * len(KEYS)
    expected = ([start + i * MIN for i in range(7 * 60)], [float(i) for i in range(7 * 60)])
    assert all(v == expected for v in every_sample(store).values())


def test_on_sqlite_the_wal_file_is_checkpointed_by_the_background_thread_not_by_appends(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's automatic WAL checkpoint ran inside whichever commit crossed 16 MiB, an append's
    included; with background checkpoints the store's connections leave it to the thread."""
    monkeypatch.setattr(background_module, "WAL_CHECKPOINT_BYTES", 1)  # after every append
    engine = create_store_engine(sqlite_url)
    store = TimeSeriesStore(engine, ManualClock(T0), StoreOptions(background_checkpoints=True))
    store.open()
    assert store.background is not None
    real = background_module.BackgroundCheckpoints.checkpoint_wal
    threads: list[str] = []

    def recorded(self: Any) -> int:
        threads.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(background_module.BackgroundCheckpoints, "checkpoint_wal", recorded)

    def autocheckpoint(conn: Any) -> int:
        cur = conn.cursor()
        try:
            cur.execute("PRAGMA wal_autocheckpoint")
            return int(cur.fetchone()[0])
        finally:
            cur.close()

    try:
        assert autocheckpoint(store._conn) == 0
        for i in range(3):
            scrape(store, T0 + i * MIN, float(i))
        wait_for(lambda: len(threads) >= 1)
        assert set(threads) == {"store-checkpoints"}
    finally:
        store.close()
    with engine.connect() as conn:  # the pooled connections are back to automatic checkpoints
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one() == SQLITE_AUTOCHECKPOINT_PAGES
    raw = engine.raw_connection()
    try:
        assert autocheckpoint(raw) == SQLITE_AUTOCHECKPOINT_PAGES
    finally:
        raw.close()
        engine.dispose()


def test_a_background_checkpoint_on_sqlite_copies_its_pages_every_so_many_samples_not_every_slice(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each slice commits on its own, but the WAL file is checkpointed (with its syncs) once every
    WAL_CHECKPOINT_SLICE_SAMPLES and once at the end; after every slice, an early checkpoint at
    100 k series ran ~2,600 of them. Everything flushed is still read back."""
    _fixed_slices(monkeypatch, 120)  # 6 series a slice
    monkeypatch.setattr(background_module, "WAL_CHECKPOINT_SLICE_SAMPLES", 600)  # every 5 slices
    store = TimeSeriesStore(create_store_engine(sqlite_url), ManualClock(T0),
                            StoreOptions(background_checkpoints=True, checkpoint_grace_ms=0))
    store.open()
    assert store.background is not None
    slices: list[int] = []
    wal_checkpoints: list[int] = []
    real_after, real_wal = background_module.SlicePublisher.after, background_module.BackgroundCheckpoints.checkpoint_wal

    def counted_after(self: Any, sids: Any) -> None:
        slices.append(len(sids))
        real_after(self, sids)

    def counted_wal(self: Any) -> int:
        wal_checkpoints.append(sum(slices))
        return real_wal(self)

    monkeypatch.setattr(background_module.SlicePublisher, "after", counted_after)
    monkeypatch.setattr(background_module.BackgroundCheckpoints, "checkpoint_wal", counted_wal)
    try:
        start = T0 - T0 % (2 * HOUR)
        for i in range(126):  # one sample a minute: the first 2 h range comes due at the end
            scrape(store, start + i * MIN, float(i))
        wait_for(lambda: store.stats["checkpoints"] >= 1)
        assert sum(slices) == 120 * len(KEYS)  # 20 slices
        assert wal_checkpoints == [600, 1_200, 1_800, 2_400, 2_400]  # every fifth slice, and at the end
        assert every_sample(store)["7"] == ([start + i * MIN for i in range(126)], [float(i) for i in range(126)])
    finally:
        store.close()
