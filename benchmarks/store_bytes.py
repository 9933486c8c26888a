"""Section 2 of :mod:`benchmarks.store_bench`: bytes per sample of the ingest section's SQLite
file, and of the same samples in VictoriaMetrics."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from benchmarks._common import MIB, Fleet, Target, dir_bytes, section, skipped
from benchmarks._victoriametrics import VM_BINARY, VictoriaMetrics
from benchmarks.store_trace_series import report_trace_series

BYTES_GOAL = 4.0


@dataclass(frozen=True)
class SqliteSizes:
    """Sizes in bytes of one VACUUMed SQLite store file."""

    file: int
    trees: dict[str, int]  # b-tree name -> bytes of its pages (dbstat), or an estimate
    chunk_payload: int  # SUM(length(data))
    chunk_samples: int
    chunk_rows: int
    rollup_rows: dict[int, tuple[int, int]]  # resolution_ms -> (span rows, buckets)
    chunk_overflow: tuple[int, int, int] | None  # overflow pages of chunks: (count, bytes, unused bytes)
    exact: bool  # dbstat was available


def sqlite_sizes(path: Path) -> SqliteSizes:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    payload, samples, rows = conn.execute("SELECT SUM(length(data)), SUM(n), COUNT(*) FROM chunks").fetchone()
    rollup_rows = {
        int(res): (int(rows), int(buckets))
        for res, rows, buckets in conn.execute(
            "SELECT resolution_ms, COUNT(*), SUM(n) FROM rollup_spans GROUP BY resolution_ms"
        )
    }
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
        # No dbstat: the payload plus a rough per-row overhead; a rollup bucket is a 56-byte record.
        trees = {"chunks": int(payload) + 40 * int(rows),
                 "rollup_spans": sum(40 * n + 56 * buckets for n, buckets in rollup_rows.values())}
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


def cold_bytes(db_path: Path, tmp: Path) -> tuple[int, int]:
    """Bytes on disk (``du``) of the cold tier once every chunk of a copy of the file moved there,
    and the number of files."""
    import shutil
    import subprocess

    from store import ManualClock, StoreOptions, TimeSeriesStore, create_store_engine

    copy = tmp / "cold-copy.sqlite"
    shutil.copy(db_path, copy)
    cold = tmp / "cold-tier"
    store = TimeSeriesStore(create_store_engine(f"sqlite:///{copy}"), ManualClock(2**62 // 2),
                            StoreOptions(cold_url=str(cold), cold_after_ms=0, cold_retention_ms=2**62))
    store.open()
    try:
        moved = store.tier_cold(2**62 // 2)
    finally:
        store.close(flush=False)
        store.engine.dispose()
        copy.unlink()
    du = int(subprocess.run(["du", "-sb", str(cold)], capture_output=True, text=True, check=True).stdout.split()[0])
    shutil.rmtree(cold)
    return du, moved.files


def bench_bytes(db_path: Path, fleet: Fleet, tmp: Path, use_vm: bool) -> list[str]:
    section("2. bytes per sample")
    sizes = sqlite_sizes(db_path)
    samples = sizes.chunk_samples
    if samples != fleet.samples:
        print(f"WARNING: chunks hold {samples:,} samples, {fleet.samples:,} were appended")
    per = 1 / samples
    chunk_pages = sizes.trees["chunks"]
    rollups = sum(size for name, size in sizes.trees.items() if "rollup_spans" in name)
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
    rows = ", ".join(f"{res // 1000}s: {b:,} buckets in {n:,} spans" for res, (n, b) in sorted(sizes.rollup_rows.items()))
    print(f"  rollups ({rows})".ljust(46) + f"{rollups * per:7.3f} B/sample")
    print(f"  series table and its indexes                {series * per:7.3f} B/sample")
    print(
        f"  whole database file                         {sizes.file * per:7.3f} B/sample ({sizes.file / MIB:.1f} MiB)"
    )
    print(
        "  (the whole file holds the rollups in addition to the raw chunks: 1m and 1h aggregates, kept"
        " 35 d / 400 d while raw chunks go after 7 d; at 15 s scrapes they cost more than the chunks)"
    )
    cold = cold_bytes(db_path, tmp)
    print(f"cold tier: every chunk moved to Parquet ({cold[1]} files), du of the directory "
          f"{cold[0] * per:7.3f} B/sample")
    report_trace_series()
    vm = vm_bytes(fleet, tmp) if use_vm else None
    if vm is None:
        why = f"not installed: no {VM_BINARY}, Debian package victoria-metrics" if use_vm else "--no-vm"
        print(f"VictoriaMetrics: SKIP ({why})")
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
    # the same bytes on every run: one measurement
    lines = [Target("bytes_per_sample_sqlite", chunk_pages * per, BYTES_GOAL, False).line()]
    if vm is None:
        lines.append(skipped("bytes_per_sample_vs_victoriametrics", 1.0, False, "VictoriaMetrics not run"))
    else:
        lines.append(Target("bytes_per_sample_vs_victoriametrics", chunk_pages / max(vm[0], 1), 1.0, False).line())
    return lines
