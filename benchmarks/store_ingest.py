"""Section 1 of :mod:`benchmarks.store_bench`: ingest into the store against raw SQLite and
PostgreSQL loads (also the ``feed`` loop the dashboard section loads its store with)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._common import (
    F64,
    HOUR_MS,
    I64,
    SCRAPE_MS,
    Fleet,
    Target,
    mixed_fleet,
    pg_dsn,
    pg_store_url,
    postgres_database,
    rate,
    recent_hour,
    section,
    skipped,
    spread,
)
from benchmarks.store_common import Sizes, close_store, open_store
from store import ManualClock, SampleBatch, TimeSeriesStore
from store.engine import SQLITE_AUTOCHECKPOINT_PAGES, SQLITE_PAGE_SIZE

INGEST_GOAL = 0.7
SENDERS = 8  # concurrent senders of the group-commit run (scrape workers, one target each)


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
    checkpoint_cpu_s: float = 0.0  # process CPU of the final forced checkpoint (ours only)


def forced_checkpoint_cpu_s(store: TimeSeriesStore) -> float:
    """``checkpoint(force=True)``, timed as the process's CPU (it runs on the background
    thread where there is one; the appends are done by then)."""
    began = time.process_time()
    store.checkpoint(force=True)
    return time.process_time() - began


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
    checkpoint_cpu_s = forced_checkpoint_cpu_s(store)
    durable_s = time.perf_counter() - started
    if accepted != fleet.samples:
        raise SystemExit(f"the store accepted {accepted} of {fleet.samples} samples")
    per = "scrape" if k == 1 else f"{k} scrapes"
    return IngestRun(f"ours, {per} per append ({k * n:,} samples)", appends, fleet.samples, ack_s, durable_s,
                     checkpoint_cpu_s)


def feed_concurrent(store: TimeSeriesStore, clock: ManualClock, fleet: Fleet, senders: int) -> IngestRun:
    """``senders`` threads, each one target's share of the series, append their scrapes as a
    scrape worker does (each batch durable before the next); the store groups the commits of
    batches that wait at the same time. The clock follows the newest data."""
    ids = store.resolve(fleet.keys)
    by_time = np.ascontiguousarray(fleet.values.T)
    shares = np.array_split(np.arange(fleet.n_series), senders)
    accepted = [0] * senders
    clock_lock = threading.Lock()

    def send(i: int) -> None:
        mine = shares[i]
        keys = [fleet.keys[k] for k in mine]
        for j in range(fleet.n_points):
            ts = int(fleet.ts_ms[j])
            with clock_lock:
                if ts > clock.now_ms():
                    clock.set(ts)
            accepted[i] += store.append(SampleBatch.one_per_key(keys, ts, by_time[j, mine], ids[mine])).accepted

    threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
    settle()
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ack_s = time.perf_counter() - started
    checkpoint_cpu_s = forced_checkpoint_cpu_s(store)
    durable_s = time.perf_counter() - started
    if sum(accepted) != fleet.samples:
        raise SystemExit(f"the store accepted {sum(accepted)} of {fleet.samples} samples")
    return IngestRun(f"ours, {senders} concurrent senders (group commit)", senders * fleet.n_points, fleet.samples,
                     ack_s, durable_s, checkpoint_cpu_s)


def ingest_concurrent(url: str, fleet: Fleet, senders: int) -> IngestRun:
    store, clock = open_store(url, int(fleet.ts_ms[0]))
    try:
        return feed_concurrent(store, clock, fleet, senders)
    finally:
        close_store(store)


def ingest_ours(url: str, fleet: Fleet, scrapes_per_append: int) -> IngestRun:
    store, clock = open_store(url, int(fleet.ts_ms[0]))
    try:
        return feed(store, clock, fleet, scrapes_per_append)
    finally:
        close_store(store)


def sqlite_pragmas(conn: sqlite3.Connection) -> None:
    """The PRAGMAs :func:`store.create_store_engine` sets, so the baseline runs alike."""
    for pragma in (
        f"page_size={SQLITE_PAGE_SIZE}",
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "cache_size=-65536",
        f"wal_autocheckpoint={SQLITE_AUTOCHECKPOINT_PAGES}",
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
    """For scale: one INSERT of a blob the size of ours per scrape, each its own transaction in
    one round trip (autocommit), as the store's write-ahead insert is in the steady state."""
    import psycopg

    blob = bytes(24 * fleet.n_series)
    with psycopg.connect(pg_dsn(database), autocommit=True) as conn:
        conn.execute("CREATE TABLE blobs (id bigserial PRIMARY KEY, payload bytea NOT NULL)")
        conn.execute("ALTER TABLE blobs ALTER COLUMN payload SET STORAGE EXTERNAL")
        settle()
        started = time.perf_counter()
        for _ in range(fleet.n_points):
            conn.execute("INSERT INTO blobs (payload) VALUES (%b)", (blob,))
        elapsed = time.perf_counter() - started
    return IngestRun("raw bytea INSERT per scrape (autocommit)", fleet.n_points, fleet.samples, elapsed, elapsed)


def median_run(runs: Sequence[IngestRun]) -> IngestRun:
    """The run with the median durable time (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r.durable_s)[(len(runs) - 1) // 2]


def print_runs(backend: str, runs: Sequence[IngestRun], raw: IngestRun, pairs: int) -> None:
    print(
        f"{backend}: {raw.samples:,} samples (raw one-transaction and ours one scrape per append: "
        f"the median of {pairs} alternating runs each)"
    )
    print(
        f"  {'run':<44} {'appends':>7} {'ack s':>7} {'ack rate':>19} {'durable s':>9} {'durable rate':>19} {'vs raw':>6}"
        f" {'final checkpoint CPU s':>22}"
    )
    for run in runs:
        ratio = raw.durable_s / run.durable_s
        checkpoint = f"{run.checkpoint_cpu_s:22.2f}" if run.checkpoint_cpu_s else f"{'-':>22}"
        print(
            f"  {run.label:<44} {run.appends:>7,} {run.ack_s:7.2f} {rate(run.samples, run.ack_s):>19} "
            f"{run.durable_s:9.2f} {rate(run.samples, run.durable_s):>19} {ratio:6.2f} {checkpoint}"
        )


def compare_ingest(
    backend: str,
    pairs: int,
    ours: Callable[[int, int], IngestRun],
    raw: Callable[[int], IngestRun],
    floor: Callable[[], IngestRun],
    concurrent: Callable[[int], IngestRun] | None = None,
) -> tuple[list[float], list[float]]:
    """Alternate ours (one scrape per append) and the raw load ``pairs`` times, add one run of
    ten scrapes per append and the commit-per-scrape floor; print the median runs.
    ``ours(pair, scrapes_per_append)``, ``raw(pair)``. Returns raw time / ours (durable) of
    every pair, and of ``concurrent`` (run in every pair too, when given)."""
    ours_runs, raw_runs, concurrent_runs = [], [], []
    for attempt in range(pairs):
        ours_runs.append(ours(attempt, 1))
        raw_runs.append(raw(attempt))
        if concurrent is not None:
            concurrent_runs.append(concurrent(attempt))
    batched = ours(pairs, 10)
    mid_raw = median_run(raw_runs)
    shown = [mid_raw, floor(), median_run(ours_runs), batched]
    if concurrent_runs:
        shown.append(median_run(concurrent_runs))
    print_runs(backend, shown, mid_raw, pairs)
    ratios = [r.durable_s / o.durable_s for o, r in zip(ours_runs, raw_runs)]
    print(f"  raw / ours, durable, per pair: {spread(ratios)}")
    print(f"  final checkpoint CPU s, ours one scrape per append: {spread([o.checkpoint_cpu_s for o in ours_runs])}")
    grouped = [r.durable_s / o.durable_s for o, r in zip(concurrent_runs, raw_runs)]
    if grouped:
        print(f"  raw / ours with concurrent senders, durable, per pair: {spread(grouped)}")
    return ratios, grouped


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

    ratios, _ = compare_ingest(
        "SQLite",
        sizes.ingest_runs,
        lambda attempt, k: ingest_ours(f"sqlite:///{sqlite_file(f'ours_x{k}', attempt)}", fleet, k),
        lambda attempt: raw_sqlite(sqlite_file("raw", attempt), fleet),
        lambda: raw_commit_per_scrape_sqlite(sqlite_file("raw_commits", 0), fleet),
    )
    lines.append(Target.median_of("ingest_sqlite_vs_raw", ratios, INGEST_GOAL, True).line())

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

    def pg_concurrent(_attempt: int) -> IngestRun:
        with postgres_database("imbench_group") as name:
            return ingest_concurrent(pg_store_url(name), fleet, SENDERS)

    ratios, grouped = compare_ingest("PostgreSQL", sizes.ingest_runs, pg_ours, pg_raw, pg_floor, pg_concurrent)
    lines.append(Target.median_of("ingest_postgres_vs_raw", ratios, INGEST_GOAL, True).line())
    lines.append(Target.median_of(f"ingest_postgres_{SENDERS}_senders_vs_raw", grouped, INGEST_GOAL, True).line())
    return lines, sqlite_file("ours_x1", 0), fleet
