"""The cold tier on SQLite and PostgreSQL: a week moved to Parquet answers exactly as before,
a file gone or corrupt costs only its range (with a warning that names it), a killed move
loses and doubles nothing, and retention applies per tier."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from store import (
    ManualClock,
    RangeQuery,
    Reader,
    SampleBatch,
    Selector,
    SeriesKey,
    StoreOptions,
    TimeSeriesStore,
)
from store.engine import create_store_engine
from store.read_warnings import collecting
from tests.conftest import T0, StoreFactory

DAY = 86_400_000
STEP = 300_000  # 5 min
DAYS = 9
KEYS = [SeriesKey.of("gpu_power_watts", gpu=str(g), host=f"node-{g % 3}") for g in range(12)]
START = T0 - T0 % DAY - DAYS * DAY
END = START + DAYS * DAY


def fill(store: TimeSeriesStore) -> None:
    rng = np.random.default_rng(5)
    steps = DAYS * DAY // STEP
    values = np.cumsum(rng.normal(0, 3, (steps, len(KEYS))), axis=0) + 300
    per = 24  # two hours of scrapes per append: checkpoints still cut at every 2 h boundary
    index = np.tile(np.arange(len(KEYS), dtype=np.int64), per)
    for j in range(0, steps, per):
        ts = START + np.arange(j, j + per, dtype=np.int64) * STEP
        store.clock.set(int(ts[-1]))  # type: ignore[attr-defined]
        store.append(SampleBatch(KEYS, index, np.repeat(ts, len(KEYS)), values[j : j + per].reshape(-1)))
    store.clock.set(END)  # type: ignore[attr-defined]
    store.checkpoint(force=True)


def answers(store: TimeSeriesStore) -> dict[str, Any]:
    """Raw samples of every series, and a stepped read that decodes chunks (7 min steps divide
    no rollup), over the whole range and over a day in the middle."""
    reader = Reader(store)
    out: dict[str, Any] = {}
    for name, lo, hi in (("all", 0, 2**62), ("day3", START + 3 * DAY, START + 4 * DAY - 1)):
        out[f"raw-{name}"] = sorted((s.key.get("gpu"), s.ts_ms.tolist(), s.values.tolist())
                                    for s in reader.raw(Selector("gpu_power_watts"), lo, min(hi, END)))
        results = reader.range(RangeQuery(Selector("gpu_power_watts"), max(lo, START), min(hi, END), 420_000, "avg"))
        out[f"avg-{name}"] = sorted((dict(r.labels).get("gpu"), r.ts_ms.tolist(),
                                     [None if v != v else v for v in np.round(r.values, 9).tolist()]) for r in results)
    return out


def cold_options(cold: Path, **extra: Any) -> StoreOptions:
    return StoreOptions(cold_url=str(cold), cold_after_ms=2 * DAY, chunk_cache_bytes=0, **extra)


def count(store: TimeSeriesStore, sql: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def test_a_week_moved_to_the_cold_tier_answers_exactly_as_before(make_store: StoreFactory, tmp_path: Path) -> None:
    hot = make_store(StoreOptions(chunk_cache_bytes=0))
    fill(hot)
    before = answers(hot)
    chunks_before = count(hot, "SELECT COUNT(*) FROM chunks")
    cold_dir = tmp_path / "cold"
    store = make_store(cold_options(cold_dir))
    moved = store.tier_cold(END)
    assert moved.chunks > 0 and moved.files >= 1
    assert moved.samples == count(store, "SELECT SUM(samples) FROM cold_files") > 0
    left = count(store, "SELECT COUNT(*) FROM chunks")
    assert left + moved.chunks == chunks_before
    assert count(store, f"SELECT COUNT(*) FROM chunks WHERE end_ms < {END - 2 * DAY}") == 0
    assert count(store, "SELECT SUM(chunks) FROM cold_files") == moved.chunks
    assert sorted(p.name for p in cold_dir.iterdir()) == sorted(
        str(r[0]) for r in store.engine.connect().execute(text("SELECT path FROM cold_files")))
    with collecting() as warnings:
        assert answers(store) == before
    assert warnings == []
    size = sum(p.stat().st_size for p in cold_dir.iterdir())
    assert size == moved.bytes == count(store, "SELECT SUM(bytes) FROM cold_files")
    assert store.tier_cold(END).chunks == 0  # nothing more is due


def test_a_corrupt_or_vanished_cold_file_costs_its_range_with_a_warning_naming_it(make_store: StoreFactory,
                                                                                  tmp_path: Path) -> None:
    cold_dir = tmp_path / "cold"
    store = make_store(cold_options(cold_dir))
    fill(store)
    store.tier_cold(END)
    files = sorted(cold_dir.iterdir())
    files[0].write_bytes(b"PAR1 this is not a parquet file")
    reader = Reader(store)
    with collecting() as warnings:
        got = {s.key.get("gpu"): s.ts_ms for s in reader.raw(Selector("gpu_power_watts"), 0, 2**62)}
    assert len(warnings) == 1 and files[0].name in warnings[0] and "partial data" in warnings[0]
    assert all(int(ts[0]) >= END - 2 * DAY - 2 * 3_600_000 for ts in got.values())  # the hot days are all there
    assert all(int(ts[-1]) == END - STEP for ts in got.values())
    for f in files:
        f.unlink()
    cold_dir.rmdir()  # the whole directory gone
    with collecting() as warnings:
        hot_only = reader.raw(Selector("gpu_power_watts"), END - DAY, END)
    assert warnings == [] and len(hot_only) == len(KEYS)  # a hot range never touches the tier
    with collecting() as warnings:
        reader.raw(Selector("gpu_power_watts"), START, END)
    assert len(warnings) == len(files)


def test_retention_applies_per_tier(make_store: StoreFactory, tmp_path: Path) -> None:
    cold_dir = tmp_path / "cold"
    store = make_store(cold_options(cold_dir, raw_retention_ms=DAY, cold_retention_ms=6 * DAY))
    fill(store)
    chunks = count(store, "SELECT COUNT(*) FROM chunks")
    from store.retention import apply_retention

    apply_retention(store, END)  # raw retention (1 day) no longer deletes: chunks move instead
    assert count(store, "SELECT COUNT(*) FROM chunks") == chunks
    store.tier_cold(END - 3 * DAY)  # a first file: chunks ending before END - 5 days
    store.tier_cold(END)  # a second: up to END - 2 days
    with store.engine.connect() as conn:
        ends = [int(r[0]) for r in conn.execute(text("SELECT end_ms FROM cold_files ORDER BY end_ms"))]
    assert len(ends) == 2
    assert ends[0] < END - 5 * DAY <= ends[1] < END - 2 * DAY
    store.tier_cold(END + 2 * DAY)  # the cold tier keeps 6 days: the first file goes, the second stays
    with store.engine.connect() as conn:  # (and the rest of the chunks moved into a third)
        now_ends = [int(r[0]) for r in conn.execute(text("SELECT end_ms FROM cold_files ORDER BY end_ms"))]
    assert ends[0] not in now_ends and now_ends[0] == ends[1] and len(now_ends) == 2
    assert len(list(cold_dir.iterdir())) == 2
    first = min(int(s.ts_ms[0]) for s in Reader(store).raw(Selector("gpu_power_watts"), 0, 2**62))
    assert ends[0] < first <= END - 5 * DAY + 2 * 3_600_000  # what the first file held is gone, the rest is there


KILLED_MOVE = textwrap.dedent("""
    import sys, time
    from store import ManualClock, StoreOptions, TimeSeriesStore, create_store_engine
    from store import cold_tier
    url, cold, now, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    real_write = cold_tier.ColdTier.write
    def write_then_hang(self, name, table):
        size = real_write(self, name, table)
        print("written", flush=True)
        time.sleep(60)
        return size
    cold_tier.ColdTier.write = write_then_hang
    store = TimeSeriesStore(create_store_engine(url), ManualClock(now), StoreOptions(cold_url=cold, cold_after_ms=after))
    store.open()
    store.tier_cold(now)
""")


def test_a_move_killed_after_its_file_loses_and_doubles_nothing(store_url: str, make_store: StoreFactory,
                                                                tmp_path: Path) -> None:
    store = make_store(StoreOptions(chunk_cache_bytes=0))
    fill(store)
    before = answers(store)
    chunks = count(store, "SELECT COUNT(*) FROM chunks")
    cold_dir = tmp_path / "cold"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", KILLED_MOVE, store_url, str(cold_dir), str(END), str(2 * DAY)],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.strip() == "written", proc.stderr.read().decode() if proc.stderr else line
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert len(list(cold_dir.iterdir())) == 1  # the file is there, nothing names it
    assert count(store, "SELECT COUNT(*) FROM cold_files") == 0
    assert count(store, "SELECT COUNT(*) FROM chunks") == chunks
    reopened = make_store(cold_options(cold_dir))
    assert answers(reopened) == before
    moved = reopened.tier_cold(END)  # the orphan is swept, the move done again
    files = [str(r[0]) for r in reopened.engine.connect().execute(text("SELECT path FROM cold_files"))]
    assert sorted(p.name for p in cold_dir.iterdir()) == sorted(files) and moved.chunks > 0
    assert answers(make_store(cold_options(cold_dir))) == before


def test_the_setting_reaches_the_store(tmp_path: Path) -> None:
    from infermeter.settings import StoreSettings

    options = StoreSettings.model_validate({"cold_tier": {"url": str(tmp_path / "c"), "after": "2d"}}).options()
    assert options.cold_url == str(tmp_path / "c") and options.cold_after_ms == 2 * DAY
    store = TimeSeriesStore(create_store_engine(f"sqlite:///{tmp_path / 'x.db'}"), ManualClock(T0), options)
    assert store.cold is not None and (tmp_path / "c").is_dir()
