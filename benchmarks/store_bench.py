"""Benchmark of the time-series store: ingest, bytes per sample, a dashboard query, service RSS.

Run from the repository root: ``.venv/bin/python -m benchmarks.store_bench`` (full sizes, about
4 minutes on 2 cores), ``--quick`` for a smaller run, ``--repeats N`` for the runs per headline
figure (default 3), ``--sections ingest,bytes,dashboard,rss,stalls,restart`` for a subset (``bytes`` reuses the
SQLite file of ``ingest``, so it runs ``ingest`` too).

Everything is measured side by side in one run, on the same synthetic data:

1. **ingest** -- 1,000 dcgm-exporter-shaped series x 2,000 scrapes 15 s apart (a third integer
   GPU utilisation random walks, a third board power in W at milliwatt resolution, a third
   energy counters in mJ) fed to ``TimeSeriesStore.append`` one scrape (1,000 samples) per
   call, and again ten scrapes per call, on SQLite and on PostgreSQL (a throwaway database).
   Timed: until every append is acknowledged (committed to the write-ahead table), and until
   the final ``checkpoint(force=True)`` has put every sample in chunks -- the target figure;
   that checkpoint's process CPU is printed per run too (chunk encoding and rollup packing).
   Series ids are resolved once beforehand (as a scraper caches series refs) and not timed.
   Baselines, timed from prepared rows to commit: sqlite3 ``executemany`` into a plain table
   in one transaction (same PRAGMAs), and psycopg binary ``COPY`` of a prebuilt body into a
   plain table. For scale, also one raw commit per scrape of a blob as large as ours (on
   PostgreSQL an autocommit INSERT: one round trip, as the store's in the steady state).
   Ours (one scrape per append) and the raw load alternate ``--repeats`` times; the target is
   the median of the pairs' ratios (their range is printed); every timed run starts after
   ``sync`` so it does not pay for earlier writeback.
2. **bytes** -- the SQLite file of the scrape-shaped run, closed and VACUUMed: chunk payload,
   pages of the chunks table (``dbstat``, row overhead included; the target), rollups and the
   whole file, per sample; VictoriaMetrics (``/api/v1/import`` of the same samples, flushed
   and force-merged) on-disk bytes per sample.
3. **dashboard** -- 64 utilisation series x 7 days at 15 s in a fresh SQLite store. A range
   query over all of them, ``avg`` per step, at step = the smallest whole minute >= range/1000
   and at 1 h, against (a) reading every chunk row, decoding it and folding to the same steps
   with numpy (values must agree), and (b) VictoriaMetrics ``avg_over_time(m[step])``
   ``query_range`` over the same samples (HTTP round trip with the body read, result cache
   off). Ours and the raw decode alternate; the target is the median ratio over the runs
   (5, or ``--repeats`` if more), with its range.
4. **rss** -- ``infermeter up`` on a temporary SQLite store: RSS idle after /ready, then after
   5,000,000 samples pushed as Prometheus text (5,000 series per body, explicit millisecond
   timestamps 15 s apart, starting at the wall clock), peak RSS and VmHWM, HTTP ingest rate.
5. **stalls** -- append latency and scrape cadence across a 2 h chunk boundary with 100,000
   series (``--stall-series``; quick: 5,000): PostgreSQL with background checkpoints, PostgreSQL
   inline, SQLite background and inline; see :mod:`benchmarks.store_stalls`.
6. **restart** -- a stop and the next start with 35 M samples in the head (100,000 series x 350
   scrapes; quick: 10,000 x 100): a stop that writes what is due and the start that replays the
   rest, against a stop that checkpoints the whole head; see :mod:`benchmarks.store_restart`.
7. **pressure** (only when named in ``--sections``; about 5 minutes a run) -- the store's CPU per
   million samples while early checkpoints run, 60,000 series a second (quick: 20,000); see
   :mod:`benchmarks.store_pressure`. A figure, no target.

The output ends with one line per target:
``target <name>: <median> [<low>..<high>, median of <n>] (goal <op> <goal>) PASS|SHORT|SKIP``.
Timings on a shared machine are noisy; the load average is printed at the start and the end.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.store_bench")

import argparse
import dataclasses
import os
import sqlite3
import time
from collections.abc import Sequence

from benchmarks._common import add_repeats, bench_parser, postgres_available, scratch_dir
from benchmarks.store_bytes import bench_bytes
from benchmarks.store_common import FULL, QUICK
from benchmarks.store_dashboard import bench_dashboard
from benchmarks.store_ingest import bench_ingest
from benchmarks.store_pressure import bench_pressure
from benchmarks.store_restart import bench_restart
from benchmarks.store_rss import bench_rss
from benchmarks.store_stalls import bench_stalls

SECTIONS = ("ingest", "bytes", "dashboard", "rss", "stalls", "restart")
OPT_IN = ("pressure",)  # run only when named


# -- main ---------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bench_parser(__spec__.name, __doc__, "smaller sizes (about a minute)")
    add_repeats(parser)
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS + OPT_IN)}"
    )
    parser.add_argument("--stall-series", type=int, help="series in the stalls section (default 100,000; quick 5,000)")
    parser.add_argument("--stall-head-minutes", type=int, default=20,
                        help="minutes of 15 s scrapes in the head before the boundary (stalls)")
    parser.add_argument("--stall-pace-ms", type=float, default=1000.0, help="wall-clock interval between appends (stalls)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL runs")
    parser.add_argument("--no-vm", action="store_true", help="skip the VictoriaMetrics comparisons")
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS + OPT_IN)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    base = QUICK if args.quick else FULL
    sizes = dataclasses.replace(base, ingest_runs=args.repeats, repeats=max(base.repeats, args.repeats))
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
        if "stalls" in wanted:
            series = args.stall_series or (5_000 if args.quick else 100_000)
            targets += bench_stalls(series, args.stall_head_minutes, args.stall_pace_ms, args.repeats, tmp, use_postgres)
        if "restart" in wanted:
            bench_restart(*((10_000, 100) if args.quick else (100_000, 350)), args.repeats, tmp)
        if "pressure" in wanted:
            bench_pressure(*((20_000, 360, 150, 0.15) if args.quick else (60_000, 420, 300, 0.4)), args.repeats, tmp)
    print(f"\n(total {time.perf_counter() - started:.0f} s, load average {os.getloadavg()[0]:.2f})\n")
    for line in targets:
        print(line)


if __name__ == "__main__":
    main()
