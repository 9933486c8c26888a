"""Benchmark of the time-series store: ingest, bytes per sample, a dashboard query, service RSS.

Run: ``.venv/bin/python benchmarks/store_bench.py`` (full sizes, about 3 minutes on 2 cores),
``--quick`` for a smaller run, ``--sections ingest,bytes,dashboard,rss`` for a subset
(``bytes`` reuses the SQLite file of ``ingest``, so it runs ``ingest`` too).

Everything is measured side by side in one run, on the same synthetic data:

1. **ingest** -- 1,000 dcgm-exporter-shaped series x 2,000 scrapes 15 s apart (a third integer
   GPU utilisation random walks, a third board power in W at milliwatt resolution, a third
   energy counters in mJ) fed to ``TimeSeriesStore.append`` one scrape (1,000 samples) per
   call, and again ten scrapes per call, on SQLite and on PostgreSQL (a throwaway database).
   Timed: until every append is acknowledged (committed to the write-ahead table), and until
   the final ``checkpoint(force=True)`` has put every sample in chunks -- the target figure.
   Series ids are resolved once beforehand (as a scraper caches series refs) and not timed.
   Baselines, timed from prepared rows to commit: sqlite3 ``executemany`` into a plain table
   in one transaction (same PRAGMAs), and psycopg binary ``COPY`` of a prebuilt body into a
   plain table. For scale, also one raw commit per scrape of a blob as large as ours.
   Ours (one scrape per append) and the raw load alternate twice and the better run of each
   counts; every timed run starts after ``sync`` so it does not pay for earlier writeback.
2. **bytes** -- the SQLite file of the scrape-shaped run, closed and VACUUMed: chunk payload,
   pages of the chunks table (``dbstat``, row overhead included; the target), rollups and the
   whole file, per sample; VictoriaMetrics (``/api/v1/import`` of the same samples, flushed
   and force-merged) on-disk bytes per sample.
3. **dashboard** -- 64 utilisation series x 7 days at 15 s in a fresh SQLite store. A range
   query over all of them, ``avg`` per step, at step = the smallest whole minute >= range/1000
   and at 1 h, against (a) reading every chunk row, decoding it and folding to the same steps
   with numpy (values must agree), and (b) VictoriaMetrics ``avg_over_time(m[step])``
   ``query_range`` over the same samples (HTTP round trip with the body read, result cache
   off). Medians of several runs.
4. **rss** -- ``infermeter up`` on a temporary SQLite store: RSS idle after /ready, then after
   5,000,000 samples pushed as Prometheus text (5,000 series per body, explicit millisecond
   timestamps 15 s apart, starting at the wall clock), peak RSS and VmHWM, HTTP ingest rate.

The output ends with one line per target:
``target <name>: <measured> (goal <op> <goal>) PASS|SHORT|SKIP``. Timings on a shared machine
are noisy; the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (  # noqa: E402
    DAY_MS,
    F64,
    HOUR_MS,
    I64,
    MIB,
    SCRAPE_MS,
    UTIL,
    Fleet,
    Target,
    VictoriaMetrics,
    dir_bytes,
    free_port,
    gpu_labels,
    median_time,
    mixed_fleet,
    pg_dsn,
    pg_store_url,
    postgres_available,
    postgres_database,
    rate,
    recent_hour,
    scratch_dir,
    section,
    timed,
    util_fleet,
)
from infermeter import db  # noqa: E402
from store import (  # noqa: E402
    ManualClock,
    RangeQuery,
    Reader,
    SampleBatch,
    Selector,
    StoreOptions,
    TimeSeriesStore,
    create_store_engine,
)
from store.codec import decode  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
INGEST_GOAL = 0.7
BYTES_GOAL = 4.0
DASHBOARD_RAW_GOAL = 20.0
DASHBOARD_VM_GOAL = 1.0
MINUTE_MS = 60_000
SECTIONS = ("ingest", "bytes", "dashboard", "rss")


@dataclass(frozen=True)
class Sizes:
    ingest_series: int
    ingest_points: int
    dash_series: int
    dash_days: int
    rss_series: int
    rss_bodies: int
    repeats: int  # query timings: median of this many
    ingest_tries: int  # ingest ours vs raw: best of this many alternating runs


FULL = Sizes(
    ingest_series=1000,
    ingest_points=2000,
    dash_series=64,
    dash_days=7,
    rss_series=5000,
    rss_bodies=1000,
    repeats=5,
    ingest_tries=2,
)
QUICK = Sizes(
    ingest_series=300,
    ingest_points=1000,
    dash_series=16,
    dash_days=2,
    rss_series=5000,
    rss_bodies=100,
    repeats=3,
    ingest_tries=2,
)


def skipped(name: str, goal: float, higher_is_better: bool, why: str) -> str:
    sign = ">=" if higher_is_better else "<="
    return f"target {name}: n/a (goal {sign} {goal:g}) SKIP ({why})"


# -- the store ----------------------------------------------------------------------------------
def open_store(url: str, start_ms: int) -> tuple[TimeSeriesStore, ManualClock]:
    engine = create_store_engine(url)
    db.upgrade(engine)
    clock = ManualClock(start_ms)
    store = TimeSeriesStore(engine, clock, StoreOptions())
    store.open()
    return store, clock


def close_store(store: TimeSeriesStore) -> None:
    store.close()
    store.engine.dispose()


# -- 1. ingest ----------------------------------------------------------------------------------
def settle() -> None:
    """Write back dirty pages of earlier runs, so a timed run does not pay for their I/O."""
    os.sync()
    time.sleep(0.2)


@dataclass(frozen=True)
class IngestRun:
    label: str
    appends: int
    samples: int
    ack_s: float
    durable_s: float


def feed(store: TimeSeriesStore, clock: ManualClock, fleet: Fleet, scrapes_per_append: int) -> IngestRun:
    """Append the fleet scrape by scrape (or ``scrapes_per_append`` scrapes at a time), moving
    the clock with the data; then force a checkpoint."""
    ids = store.resolve(fleet.keys)
    by_time = np.ascontiguousarray(fleet.values.T)  # [scrape, series]
    n = fleet.n_series
    k = scrapes_per_append
    key_index = np.tile(np.arange(n, dtype=np.int64), k)
    accepted = appends = 0
    settle()
    started = time.perf_counter()
    for lo in range(0, fleet.n_points, k):
        hi = min(lo + k, fleet.n_points)
        clock.set(int(fleet.ts_ms[hi - 1]))
        if k == 1:
            batch = SampleBatch.one_per_key(fleet.keys, int(fleet.ts_ms[lo]), by_time[lo], ids)
        else:
            m = (hi - lo) * n
            batch = SampleBatch(
                fleet.keys, key_index[:m], np.repeat(fleet.ts_ms[lo:hi], n), by_time[lo:hi].reshape(-1), ids
            )
        accepted += store.append(batch).accepted
        appends += 1
    ack_s = time.perf_counter() - started
    store.checkpoint(force=True)
    durable_s = time.perf_counter() - started
    if accepted != fleet.samples:
        raise SystemExit(f"the store accepted {accepted} of {fleet.samples} samples")
    per = "scrape" if k == 1 else f"{k} scrapes"
    return IngestRun(f"ours, {per} per append ({k * n:,} samples)", appends, fleet.samples, ack_s, durable_s)


def ingest_ours(url: str, fleet: Fleet, scrapes_per_append: int) -> IngestRun:
    store, clock = open_store(url, int(fleet.ts_ms[0]))
    try:
        return feed(store, clock, fleet, scrapes_per_append)
    finally:
        close_store(store)


def sqlite_pragmas(conn: sqlite3.Connection) -> None:
    """The PRAGMAs :func:`store.create_store_engine` sets, so the baseline runs alike."""
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "cache_size=-65536",
        "wal_autocheckpoint=4096",
    ):
        conn.execute(f"PRAGMA {pragma}")


def columns(fleet: Fleet) -> tuple[I64, I64, F64]:
    return fleet.sids_ts_values(np.arange(1, fleet.n_series + 1, dtype=np.int64))


def raw_sqlite(path: Path, fleet: Fleet) -> IngestRun:
    """executemany of every (series_id, ts, value) row into a plain table, one transaction."""
    sid, ts, val = columns(fleet)
    sid_l, ts_l, val_l = sid.tolist(), ts.tolist(), val.tolist()
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_pragmas(conn)
    conn.execute(
        "CREATE TABLE samples (series_id INTEGER NOT NULL, ts INTEGER NOT NULL, value REAL NOT NULL)"
    )
    settle()
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO samples VALUES (?, ?, ?)", zip(sid_l, ts_l, val_l))
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return IngestRun("raw executemany, one transaction", 1, fleet.samples, elapsed, elapsed)


def pg_copy_body(sid: I64, ts: I64, val: F64) -> bytes:
    """A binary COPY body for (int8, int8, float8) rows, built by numpy."""
    row = np.dtype(
        [
            ("nfields", ">i2"),
            ("l1", ">i4"),
            ("sid", ">i8"),
            ("l2", ">i4"),
            ("ts", ">i8"),
            ("l3", ">i4"),
            ("val", ">f8"),
        ]
    )
    rows = np.empty(len(sid), row)
    rows["nfields"] = 3
    rows["l1"] = rows["l2"] = rows["l3"] = 8
    rows["sid"], rows["ts"], rows["val"] = sid, ts, val
    return b"PGCOPY\n\xff\r\n\x00" + bytes(8) + rows.tobytes() + b"\xff\xff"


def raw_postgres(database: str, fleet: Fleet) -> IngestRun:
    """Binary COPY FROM STDIN of every row into a plain table (body prepared beforehand)."""
    import psycopg

    body = pg_copy_body(*columns(fleet))
    with psycopg.connect(pg_dsn(database)) as conn:
        conn.execute(
            "CREATE TABLE samples (series_id bigint NOT NULL, ts bigint NOT NULL, value double precision NOT NULL)"
        )
        conn.commit()
        settle()
        started = time.perf_counter()
        with (
            conn.cursor() as cur,
            cur.copy("COPY samples (series_id, ts, value) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.write(body)
        conn.commit()
        elapsed = time.perf_counter() - started
    return IngestRun("raw binary COPY, one transaction", 1, fleet.samples, elapsed, elapsed)


def raw_commit_per_scrape_sqlite(path: Path, fleet: Fleet) -> IngestRun:
    """For scale: one INSERT of a blob the size of ours (24 B/sample) plus COMMIT per scrape."""
    blob = bytes(24 * fleet.n_series)
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_pragmas(conn)
    conn.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
    settle()
    started = time.perf_counter()
    for _ in range(fleet.n_points):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO blobs (payload) VALUES (?)", (blob,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return IngestRun("raw blob INSERT + COMMIT per scrape", fleet.n_points, fleet.samples, elapsed, elapsed)


def raw_commit_per_scrape_postgres(database: str, fleet: Fleet) -> IngestRun:
    import psycopg

    blob = bytes(24 * fleet.n_series)
    with psycopg.connect(pg_dsn(database)) as conn:
        conn.execute("CREATE TABLE blobs (id bigserial PRIMARY KEY, payload bytea NOT NULL)")
        conn.execute("ALTER TABLE blobs ALTER COLUMN payload SET STORAGE EXTERNAL")
        conn.commit()
        settle()
        started = time.perf_counter()
        for _ in range(fleet.n_points):
            conn.execute("INSERT INTO blobs (payload) VALUES (%b)", (blob,))
            conn.commit()
        elapsed = time.perf_counter() - started
    return IngestRun("raw bytea INSERT + COMMIT per scrape", fleet.n_points, fleet.samples, elapsed, elapsed)


def print_runs(backend: str, runs: Sequence[IngestRun], raw: IngestRun, tries: int) -> None:
    print(
        f"{backend}: {raw.samples:,} samples (raw one-transaction and ours one scrape per append: "
        f"best of {tries} alternating runs)"
    )
    print(
        f"  {'run':<44} {'appends':>7} {'ack s':>7} {'ack rate':>19} {'durable s':>9} {'durable rate':>19} {'vs raw':>6}"
    )
    for run in runs:
        ratio = raw.durable_s / run.durable_s
        print(
            f"  {run.label:<44} {run.appends:>7,} {run.ack_s:7.2f} {rate(run.samples, run.ack_s):>19} "
            f"{run.durable_s:9.2f} {rate(run.samples, run.durable_s):>19} {ratio:6.2f}"
        )


def compare_ingest(
    backend: str,
    tries: int,
    ours: Callable[[int, int], IngestRun],
    raw: Callable[[int], IngestRun],
    floor: Callable[[], IngestRun],
) -> float:
    """Alternate ours (one scrape per append) and the raw load ``tries`` times, keep the best
    of each, add one run of ten scrapes per append and the commit-per-scrape floor; print all.
    ``ours(try, scrapes_per_append)``, ``raw(try)``. Returns raw time / ours, durable."""
    ours_runs, raw_runs = [], []
    for attempt in range(tries):
        ours_runs.append(ours(attempt, 1))
        raw_runs.append(raw(attempt))
    batched = ours(tries, 10)
    best_ours = min(ours_runs, key=lambda r: r.durable_s)
    best_raw = min(raw_runs, key=lambda r: r.durable_s)
    print_runs(backend, [best_raw, floor(), best_ours, batched], best_raw, tries)
    return best_raw.durable_s / best_ours.durable_s


def bench_ingest(sizes: Sizes, tmp: Path, use_postgres: bool) -> tuple[list[str], Path, Fleet]:
    section("1. ingest")
    hours = sizes.ingest_points * SCRAPE_MS / HOUR_MS
    fleet = mixed_fleet(sizes.ingest_series, sizes.ingest_points, recent_hour(hours + 1))
    print(
        f"{fleet.n_series:,} series ({fleet.n_series // 3} util %, {fleet.n_series // 3} power W, "
        f"{fleet.n_series - 2 * (fleet.n_series // 3)} energy mJ) x {fleet.n_points:,} scrapes at 15 s"
        f" = {fleet.samples:,} samples"
    )
    print(
        "ack: every append returned (committed to the write-ahead table); durable: plus the final"
        " checkpoint(force=True), everything in chunks and rollups; vs raw: raw durable time / this one"
    )
    lines: list[str] = []

    def sqlite_file(name: str, attempt: int) -> Path:
        return tmp / f"{name}_{attempt}.sqlite"

    ratio = compare_ingest(
        "SQLite",
        sizes.ingest_tries,
        lambda attempt, k: ingest_ours(f"sqlite:///{sqlite_file(f'ours_x{k}', attempt)}", fleet, k),
        lambda attempt: raw_sqlite(sqlite_file("raw", attempt), fleet),
        lambda: raw_commit_per_scrape_sqlite(sqlite_file("raw_commits", 0), fleet),
    )
    lines.append(Target("ingest_sqlite_vs_raw", ratio, INGEST_GOAL, True).line())

    if not use_postgres:
        lines.append(
            skipped("ingest_postgres_vs_raw", INGEST_GOAL, True, "PostgreSQL not reachable on 127.0.0.1:5432")
        )
        return lines, sqlite_file("ours_x1", 0), fleet

    def pg_ours(_attempt: int, k: int) -> IngestRun:
        with postgres_database("imbench_ours") as name:
            return ingest_ours(pg_store_url(name), fleet, k)

    def pg_raw(_attempt: int) -> IngestRun:
        with postgres_database("imbench_raw") as name:
            return raw_postgres(name, fleet)

    def pg_floor() -> IngestRun:
        with postgres_database("imbench_commits") as name:
            return raw_commit_per_scrape_postgres(name, fleet)

    ratio = compare_ingest("PostgreSQL", sizes.ingest_tries, pg_ours, pg_raw, pg_floor)
    lines.append(Target("ingest_postgres_vs_raw", ratio, INGEST_GOAL, True).line())
    return lines, sqlite_file("ours_x1", 0), fleet


# -- 2. bytes per sample ------------------------------------------------------------------------
@dataclass(frozen=True)
class SqliteSizes:
    """Sizes in bytes of one VACUUMed SQLite store file."""

    file: int
    trees: dict[str, int]  # b-tree name -> bytes of its pages (dbstat), or an estimate
    chunk_payload: int  # SUM(length(data))
    chunk_samples: int
    chunk_rows: int
    rollup_rows: dict[int, int]  # resolution_ms -> rows
    chunk_overflow: tuple[int, int, int] | None  # overflow pages of chunks: (count, bytes, unused bytes)
    exact: bool  # dbstat was available


def sqlite_sizes(path: Path) -> SqliteSizes:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    payload, samples, rows = conn.execute("SELECT SUM(length(data)), SUM(n), COUNT(*) FROM chunks").fetchone()
    rollup_rows = dict(
        conn.execute("SELECT resolution_ms, COUNT(*) FROM rollups GROUP BY resolution_ms").fetchall()
    )
    overflow: tuple[int, int, int] | None = None
    try:
        trees = {
            name: int(size)
            for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        }
        count, pages, unused = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(pgsize), 0), COALESCE(SUM(unused), 0) FROM dbstat "
            "WHERE name = 'chunks' AND pagetype = 'overflow'"
        ).fetchone()
        overflow = (int(count), int(pages), int(unused))
        exact = True
    except sqlite3.OperationalError:
        # No dbstat: the payload plus a rough per-row overhead; rollups at ~9 bytes a column.
        trees = {"chunks": int(payload) + 40 * int(rows), "rollups": 90 * sum(rollup_rows.values())}
        exact = False
    conn.close()
    return SqliteSizes(
        path.stat().st_size, trees, int(payload), int(samples), int(rows), rollup_rows, overflow, exact
    )


def vm_bytes(fleet: Fleet, tmp: Path) -> tuple[int, int, int] | None:
    """(data/, indexdb/, everything but cache/) bytes after import, flush and force merge."""
    if not VictoriaMetrics.available():
        return None
    storage = tmp / "vm_bytes"
    with VictoriaMetrics(storage) as vm:
        vm.import_fleet(fleet)
        vm.flush_and_merge()
        data = dir_bytes(storage / "data")
        index = dir_bytes(storage / "indexdb")
        total = dir_bytes(storage, exclude=("cache",))
    return data, index, total


def bench_bytes(db_path: Path, fleet: Fleet, tmp: Path, use_vm: bool) -> list[str]:
    section("2. bytes per sample")
    sizes = sqlite_sizes(db_path)
    samples = sizes.chunk_samples
    if samples != fleet.samples:
        print(f"WARNING: chunks hold {samples:,} samples, {fleet.samples:,} were appended")
    per = 1 / samples
    chunk_pages = sizes.trees["chunks"]
    rollups = sizes.trees.get("rollups", 0)
    series = sum(size for name, size in sizes.trees.items() if "series" in name)
    source = "dbstat pages" if sizes.exact else "estimate (no dbstat)"
    print(
        f"SQLite, the scrape-shaped ingest file after close and VACUUM: {samples:,} samples in {sizes.chunk_rows:,} chunks"
    )
    print(f"  chunk payload, SUM(length(data))            {sizes.chunk_payload * per:7.3f} B/sample")
    print(f"  chunks table, {source:<29} {chunk_pages * per:7.3f} B/sample   <- target")
    if sizes.chunk_overflow is not None:
        count, pages, unused = sizes.chunk_overflow
        print(
            f"    of which overflow pages                   {pages * per:7.3f} B/sample "
            f"({count:,} pages, {unused / max(pages, 1):.0%} of their bytes unused)"
        )
    print(
        f"  ix_chunks_end_ms index                      {sizes.trees.get('ix_chunks_end_ms', 0) * per:7.3f} B/sample"
    )
    rows = ", ".join(f"{res // 1000}s: {n:,} rows" for res, n in sorted(sizes.rollup_rows.items()))
    print(f"  rollups ({rows})".ljust(46) + f"{rollups * per:7.3f} B/sample")
    print(f"  series table and its indexes                {series * per:7.3f} B/sample")
    print(
        f"  whole database file                         {sizes.file * per:7.3f} B/sample ({sizes.file / MIB:.1f} MiB)"
    )
    print(
        "  (the whole file holds the rollups in addition to the raw chunks: 1m and 1h aggregates, kept"
        " 35 d / 400 d while raw chunks go after 7 d; at 15 s scrapes they cost more than the chunks)"
    )
    vm = vm_bytes(fleet, tmp) if use_vm else None
    if vm is None:
        print("VictoriaMetrics: SKIP (" + ("not installed" if use_vm else "--no-vm") + ")")
    else:
        data, index, total = vm
        print("VictoriaMetrics, the same samples via /api/v1/import, after force_flush and force_merge:")
        print(f"  data/ (samples)                             {data * per:7.3f} B/sample")
        print(f"  indexdb/ (series index)                     {index * per:7.3f} B/sample")
        print(f"  everything but cache/                       {total * per:7.3f} B/sample")
        print(
            f"  ours / VictoriaMetrics: chunks table {chunk_pages / max(data, 1):.2f}x data/, "
            f"whole file {sizes.file / max(total, 1):.2f}x everything"
        )
    return [Target("bytes_per_sample_sqlite", chunk_pages * per, BYTES_GOAL, False).line()]


# -- 3. dashboard query -------------------------------------------------------------------------
def dashboard_step(range_ms: int, max_points: int = 1000) -> int:
    """The smallest whole number of minutes >= ``range_ms / max_points``."""
    return -(-range_ms // (max_points * MINUTE_MS)) * MINUTE_MS


def load_dashboard_store(
    fleet: Fleet, url: str, scrapes_per_append: int = 240
) -> tuple[TimeSeriesStore, ManualClock, float]:
    store, clock = open_store(url, int(fleet.ts_ms[0]))
    elapsed, _ = timed(lambda: feed(store, clock, fleet, scrapes_per_append))
    return store, clock, elapsed


def decode_and_fold(
    store: TimeSeriesStore, sids: Sequence[int], start_ms: int, end_ms: int, step_ms: int
) -> F64:
    """The baseline: every chunk row of ``sids`` decoded and averaged per step with numpy,
    on the reader's bucket grid ([t, t + step) from floor(start / step) * step)."""
    origin = start_ms // step_ms * step_ms
    n_steps = (end_ms - origin) // step_ms + 1
    p = store.backend.param
    conn = store.engine.raw_connection()
    try:
        cur = conn.cursor()
        cur.execute(
            f"SELECT series_id, n, data FROM chunks WHERE series_id IN ({', '.join([p] * len(sids))}) "
            f"AND end_ms >= {p} AND start_ms <= {p} ORDER BY series_id, start_ms",
            (*sids, origin, end_ms),
        )
        rows = cur.fetchall()
        cur.close()
    finally:
        conn.close()
    row_of = {sid: i for i, sid in enumerate(sids)}
    ts_parts, val_parts, row_parts = [], [], []
    for sid, n, data in rows:
        ts, val = decode(bytes(data), int(n))
        ts_parts.append(ts)
        val_parts.append(val)
        row_parts.append(np.full(len(ts), row_of[int(sid)], np.int64))
    ts, val, row = np.concatenate(ts_parts), np.concatenate(val_parts), np.concatenate(row_parts)
    keep = (ts >= origin) & (ts <= end_ms) & np.isfinite(val)
    cell = row[keep] * n_steps + (ts[keep] - origin) // step_ms
    size = len(sids) * n_steps
    sums = np.bincount(cell, weights=val[keep], minlength=size)
    counts = np.bincount(cell, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.where(counts > 0, sums / counts, np.nan)
    return avg.reshape(len(sids), n_steps)


@dataclass(frozen=True)
class QueryTimes:
    step_ms: int
    points: int  # per series, ours
    source: str  # the reader's path: rollup_<s>s or raw
    ours_s: float
    raw_s: float
    vm_s: float | None = None
    vm_points: int | None = None


def time_ours_and_raw(store: TimeSeriesStore, query: RangeQuery, sids: list[int], repeats: int) -> QueryTimes:
    """Check that the reader and the raw decode agree, then time both."""
    reader = Reader(store)
    answer = reader.range(query)
    ours = np.vstack([r.values for r in answer])
    raw = decode_and_fold(store, sids, query.start_ms, query.end_ms, query.step_ms)
    same_nan = bool(np.array_equal(np.isnan(ours), np.isnan(raw)))
    if not (same_nan and np.allclose(ours, raw, equal_nan=True)):
        worst = np.nanmax(np.abs(ours - raw))
        raise SystemExit(
            f"step {query.step_ms} ms: reader and raw decode disagree "
            f"(same NaN positions: {same_nan}, largest difference {worst})"
        )
    ours_s = median_time(lambda: reader.range(query), repeats)
    raw_s = median_time(
        lambda: decode_and_fold(store, sids, query.start_ms, query.end_ms, query.step_ms), repeats
    )
    return QueryTimes(query.step_ms, ours.shape[1], answer[0].source, ours_s, raw_s)


def time_vm(
    vm: VictoriaMetrics, qt: QueryTimes, start_ms: int, end_ms: int, n_series: int, repeats: int
) -> QueryTimes:
    """``avg_over_time(m[step])`` over the same range and step, timed as HTTP round trips."""
    promql = f"avg_over_time({UTIL}[{qt.step_ms // 1000}s])"
    series = vm.query_range(promql, start_ms, end_ms, qt.step_ms).json()["data"]["result"]
    if len(series) != n_series:
        raise SystemExit(f"VictoriaMetrics returned {len(series)} series, expected {n_series}")
    vm_s = median_time(lambda: vm.query_range(promql, start_ms, end_ms, qt.step_ms), repeats)
    return replace(qt, vm_s=vm_s, vm_points=max(len(s["values"]) for s in series))


def bench_dashboard(sizes: Sizes, tmp: Path, use_vm: bool) -> list[str]:
    section("3. dashboard query")
    span = sizes.dash_days * DAY_MS
    end = recent_hour(1)
    start = end - span
    fleet = util_fleet(sizes.dash_series, span // SCRAPE_MS + 1, start)
    store, clock, load_s = load_dashboard_store(fleet, f"sqlite:///{tmp / 'dashboard.sqlite'}")
    clock.set(end)
    print(
        f"{fleet.n_series} utilisation series x {sizes.dash_days} d at 15 s = {fleet.samples:,} samples "
        f"(loaded in {load_s:.1f} s, 1 h per append); query [end - {sizes.dash_days} d, end], avg per step"
    )
    selector = Selector(UTIL)
    sids = [sid for sid, _ in Reader(store).select(selector)]
    results = [
        time_ours_and_raw(store, RangeQuery(selector, start, end, step, "avg"), sids, sizes.repeats)
        for step in (dashboard_step(span), HOUR_MS)
    ]
    close_store(store)

    vm_note = (
        ""
        if use_vm and VictoriaMetrics.available()
        else ("VictoriaMetrics not installed" if use_vm else "--no-vm")
    )
    if not vm_note:
        with VictoriaMetrics(tmp / "vm_dashboard") as vm:
            vm.import_fleet(fleet)
            vm.flush_and_merge()
            results = [time_vm(vm, qt, start, end, fleet.n_series, sizes.repeats) for qt in results]

    print(
        f"  {'step':>6} {'pts/series':>10} {'ours ms':>8} {'source':>12} {'raw decode ms':>13} {'raw/ours':>8} "
        f"{'VM ms':>7} {'VM pts':>6} {'VM/ours':>7}"
    )
    for qt in results:
        vm_ms = f"{qt.vm_s * 1e3:7.1f}" if qt.vm_s is not None else "    n/a"
        vm_ratio = f"{qt.vm_s / qt.ours_s:7.2f}" if qt.vm_s is not None else "    n/a"
        vm_pts = f"{qt.vm_points:6d}" if qt.vm_points is not None else "   n/a"
        print(
            f"  {qt.step_ms // MINUTE_MS:>5}m {qt.points:>10} {qt.ours_s * 1e3:8.1f} {qt.source:>12} "
            f"{qt.raw_s * 1e3:13.1f} {qt.raw_s / qt.ours_s:8.2f} {vm_ms} {vm_pts} {vm_ratio}"
        )
    print(
        f"  (medians of {sizes.repeats}; ours and the raw decode agree (np.allclose, same NaN positions); "
        "VM: HTTP round trip with the JSON body read but not parsed, nocache=1)"
    )
    main = results[0]
    lines = [
        Target("dashboard_query_vs_raw_decode", main.raw_s / main.ours_s, DASHBOARD_RAW_GOAL, True).line()
    ]
    if main.vm_s is None:
        lines.append(skipped("dashboard_query_vs_victoriametrics", DASHBOARD_VM_GOAL, True, vm_note))
    else:
        ratio = main.vm_s / main.ours_s
        lines.append(Target("dashboard_query_vs_victoriametrics", ratio, DASHBOARD_VM_GOAL, True).line())
    return lines


# -- 4. RSS of `infermeter up` ------------------------------------------------------------------
DCGM_FIELDS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
)


def exposition_bodies(n_series: int, n_bodies: int, start_ms: int, seed: int = 3) -> Iterator[bytes]:
    """Prometheus text bodies of ``n_series`` dcgm-shaped series, one timestamp per body."""
    prefixes: list[str] = []
    for gpu in range(-(-n_series // len(DCGM_FIELDS))):
        labels = ",".join(f'{k}="{v}"' for k, v in gpu_labels(gpu).items())
        prefixes.extend(f"{field}{{{labels}}}" for field in DCGM_FIELDS)
    prefixes = prefixes[:n_series]
    rng = np.random.default_rng(seed)
    level = rng.integers(0, 1000, n_series)
    for b in range(n_bodies):
        level = np.abs(level + rng.integers(-5, 6, n_series))
        ts = start_ms + b * SCRAPE_MS
        yield ("\n".join([f"{p} {v} {ts}" for p, v in zip(prefixes, level.tolist())]) + "\n").encode()


class RssSampler(threading.Thread):
    """Polls a process's RSS and keeps the peak."""

    def __init__(self, proc: psutil.Process, interval_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.interval_s = interval_s
        self.peak = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def scrape_values(client: httpx.Client, names: Sequence[str]) -> dict[str, float]:
    """Unlabelled values of ``names`` from the service's /metrics (NaN when absent)."""
    found = dict.fromkeys(names, float("nan"))
    for line in client.get("/metrics").text.splitlines():
        name, _, value = line.partition(" ")
        if name in found:
            found[name] = float(value)
    return found


def wait_ready(client: httpx.Client, proc: subprocess.Popen[bytes], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"infermeter up exited with {proc.returncode}")
        try:
            if client.get("/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("infermeter up did not become ready")


@dataclass(frozen=True)
class ServiceRun:
    ready_s: float
    idle_rss: int
    after_rss: int
    peak_rss: int
    vm_hwm: int
    accepted: int
    in_requests_s: float
    wall_s: float
    checkpoints: float
    head_samples: float
    stop_s: float
    exit_code: int | None


def drive_service(proc: subprocess.Popen[bytes], port: int, sizes: Sizes) -> ServiceRun:
    """Wait for /ready, push every body, read RSS and the store's own metrics, stop with SIGINT."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120.0) as client:
        started = time.perf_counter()
        wait_ready(client, proc)
        ready_s = time.perf_counter() - started
        ps = psutil.Process(proc.pid)
        time.sleep(1.0)
        idle = ps.memory_info().rss
        sampler = RssSampler(ps)
        sampler.start()
        start_ms = (time.time_ns() // 1_000_000) // SCRAPE_MS * SCRAPE_MS
        accepted = 0
        in_requests = 0.0
        wall = time.perf_counter()
        for body in exposition_bodies(sizes.rss_series, sizes.rss_bodies, start_ms):
            t0 = time.perf_counter()
            response = client.post(
                "/api/v1/samples", content=body, headers={"Content-Type": "text/plain; version=0.0.4"}
            )
            in_requests += time.perf_counter() - t0
            response.raise_for_status()
            accepted += response.json()["data"]["accepted"]
        wall = time.perf_counter() - wall
        after = ps.memory_info().rss
        sampler.stop()
        hwm = vm_hwm(proc.pid)
        stats = scrape_values(client, ("infermeter_store_checkpoints_total", "infermeter_store_head_samples"))
    stop_started = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.wait(120)
    return ServiceRun(
        ready_s=ready_s,
        idle_rss=idle,
        after_rss=after,
        peak_rss=max(sampler.peak, after),
        vm_hwm=hwm,
        accepted=accepted,
        in_requests_s=in_requests,
        wall_s=wall,
        checkpoints=stats["infermeter_store_checkpoints_total"],
        head_samples=stats["infermeter_store_head_samples"],
        stop_s=time.perf_counter() - stop_started,
        exit_code=proc.returncode,
    )


def bench_rss(sizes: Sizes, tmp: Path) -> None:
    section("4. RSS of `infermeter up`")
    config = tmp / "infermeter.yaml"
    config.write_text(f'store:\n  url: "sqlite:///{tmp / "up.sqlite"}"\nlogging:\n  level: WARNING\n')
    port = free_port()
    total = sizes.rss_series * sizes.rss_bodies
    with open(tmp / "up.log", "wb") as log:
        proc = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "infermeter"), "--config", str(config), "up", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        try:
            run = drive_service(proc, port, sizes)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if run.accepted != total:
        print(f"WARNING: the service accepted {run.accepted:,} of {total:,} samples")
    print(
        f"{sizes.rss_bodies:,} bodies x {sizes.rss_series:,} series = {total:,} samples, Prometheus text with ms "
        f"timestamps 15 s apart from the wall clock on ({sizes.rss_bodies * SCRAPE_MS / HOUR_MS:.1f} h of data time)"
    )
    print(f"  ready after                          {run.ready_s:8.1f} s")
    print(f"  RSS idle after startup               {run.idle_rss / MIB:8.1f} MiB")
    print(f"  RSS after the last push              {run.after_rss / MIB:8.1f} MiB")
    print(f"  peak RSS (psutil, polled 50 ms)      {run.peak_rss / MIB:8.1f} MiB")
    print(f"  VmHWM (/proc/<pid>/status)           {run.vm_hwm / MIB:8.1f} MiB")
    print(
        f"  HTTP ingest, time inside requests    {run.in_requests_s:8.1f} s  {rate(total, run.in_requests_s)}"
    )
    print(f"  HTTP ingest, wall incl. client work  {run.wall_s:8.1f} s  {rate(total, run.wall_s)}")
    print(
        f"  store after the push                 {run.checkpoints:8.0f} checkpoints that flushed samples, "
        f"{run.head_samples:,.0f} samples in the head"
    )
    print(f"  shutdown (SIGINT, final checkpoint)  {run.stop_s:8.1f} s, exit code {run.exit_code}")


# -- main ---------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about half a minute)")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS)}"
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL runs")
    parser.add_argument("--no-vm", action="store_true", help="skip the VictoriaMetrics comparisons")
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    use_postgres = not args.no_postgres and postgres_available()
    use_vm = not args.no_vm
    wanted = set(args.sections)
    if "bytes" in wanted:
        wanted.add("ingest")
    print(
        f"store benchmark ({'quick' if args.quick else 'full'} sizes), {os.cpu_count()} CPUs, "
        f"SQLite {sqlite3.sqlite_version}, load average {os.getloadavg()[0]:.2f}"
    )
    targets: list[str] = []
    started = time.perf_counter()
    with scratch_dir("infermeter-store-bench-") as tmp:
        if "ingest" in wanted:
            lines, sqlite_path, fleet = bench_ingest(sizes, tmp, use_postgres)
            targets += lines
            if "bytes" in wanted:
                targets += bench_bytes(sqlite_path, fleet, tmp, use_vm)
        if "dashboard" in wanted:
            targets += bench_dashboard(sizes, tmp, use_vm)
        if "rss" in wanted:
            bench_rss(sizes, tmp)
    print(f"\n(total {time.perf_counter() - started:.0f} s, load average {os.getloadavg()[0]:.2f})\n")
    for line in targets:
        print(line)


if __name__ == "__main__":
    main()
