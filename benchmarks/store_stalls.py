"""Section ``stalls`` of :mod:`benchmarks.store_bench`: append latency and scrape cadence
through a chunk boundary, where the checkpoint of the whole head happens.

A store is filled (untimed) with ``series`` series up to ``head_minutes`` of data-time before
a 2 h boundary, one scrape every 15 s of data-time. Then scrapes are appended on a wall-clock
cadence (one every ``pace_ms``), each one 15 s of data-time later, across the boundary and
past the out-of-order window, so that the boundary's checkpoint (the head's ``head_minutes``
of samples into chunks and rollups) falls among them; a forced checkpoint ends the run.
Printed per configuration: append latency p50 / p99 / max (ms), the slowest 5 appends, the
cadence's jitter (start-to-start interval against the pace: p99 and max, in %), and how long
the checkpoint took where it ran.

Configurations, side by side in one run: PostgreSQL and SQLite each with the checkpoint in the
background (``background_checkpoints``, the service's default; on SQLite every slice of ~5 k
samples commits on its own) and inline (as a bare store does). Targets for both backends'
background configurations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._common import (
    SCRAPE_MS,
    Target,
    mixed_fleet,
    pg_store_url,
    postgres_database,
    section,
    skipped,
)
from infermeter import db
from store import ManualClock, SampleBatch, StoreOptions, TimeSeriesStore, create_store_engine

HOUR_MS = 3_600_000
P99_GOAL_MS = 50.0
JITTER_GOAL = 0.10


@dataclass(frozen=True)
class StallRun:
    label: str
    latencies_ms: list[float]
    intervals_ms: list[float]
    pace_ms: float
    checkpoints: int
    head_samples: int

    def line(self) -> str:
        lat = np.asarray(self.latencies_ms)
        jitter = np.abs(np.asarray(self.intervals_ms) - self.pace_ms) / self.pace_ms * 100
        worst = ", ".join(f"{v:.0f}" for v in sorted(lat)[-5:])
        return (f"{self.label:34s} {np.percentile(lat, 50):7.1f} {np.percentile(lat, 99):7.1f} {lat.max():8.1f}  "
                f"[{worst}]  jitter p99 {np.percentile(jitter, 99):5.1f} % max {jitter.max():6.1f} %  "
                f"({self.checkpoints} checkpoints, {self.head_samples / 1e6:.1f} M samples in the head at the boundary)")

    @property
    def p99_ms(self) -> float:
        return float(np.percentile(self.latencies_ms, 99))

    @property
    def jitter_p99(self) -> float:
        return float(np.percentile(np.abs(np.asarray(self.intervals_ms) - self.pace_ms) / self.pace_ms, 99))


def run_stalls(url: str, label: str, series: int, head_minutes: int, pace_ms: float, background: bool) -> StallRun:
    boundary = 1_800_000_000_000 // (2 * HOUR_MS) * (2 * HOUR_MS) + 2 * HOUR_MS
    before = head_minutes * 60_000 // SCRAPE_MS
    after = (10 * 60_000) // SCRAPE_MS  # past the 5 min out-of-order window: the boundary is due
    fleet = mixed_fleet(series, before + after, boundary - before * SCRAPE_MS)
    engine = create_store_engine(url)
    db.upgrade(engine)
    clock = ManualClock(int(fleet.ts_ms[0]))
    # The head may hold all of it: no pressure flushes, one checkpoint at the boundary.
    options = StoreOptions(background_checkpoints=background, max_head_samples=fleet.samples * 2, checkpoint_grace_ms=0)
    store = TimeSeriesStore(engine, clock, options)
    store.open()
    try:
        ids = store.resolve(fleet.keys)
        by_time = np.ascontiguousarray(fleet.values.T)

        def append(j: int) -> None:
            clock.set(int(fleet.ts_ms[j]))
            store.append(SampleBatch.one_per_key(fleet.keys, int(fleet.ts_ms[j]), by_time[j], ids))

        for j in range(before):
            append(j)
        head = store.head.samples
        latencies, starts = [], []
        next_at = time.perf_counter()
        for j in range(before, before + after):
            now = time.perf_counter()
            if now < next_at:
                time.sleep(next_at - now)
            began = time.perf_counter()
            starts.append(began)
            append(j)
            latencies.append((time.perf_counter() - began) * 1000)
            next_at += pace_ms / 1000
        if store.background is not None:  # let the boundary's checkpoint finish before the forced one
            deadline = time.monotonic() + 600
            while store.stats["checkpoints"] == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
        store.checkpoint(force=True)
        intervals = (np.diff(starts) * 1000).tolist()
        return StallRun(label, latencies, intervals, pace_ms, store.stats["checkpoints"], head)
    finally:
        store.close(flush=False)
        engine.dispose()


def bench_stalls(series: int, head_minutes: int, pace_ms: float, rounds: int, tmp: Path, use_postgres: bool) -> list[str]:
    section(f"stalls: {series:,} series, {head_minutes} min of 15 s scrapes in the head, then one scrape every "
            f"{pace_ms:.0f} ms across a 2 h boundary; {rounds} rounds")
    print(f"{'configuration':34s} {'p50 ms':>7s} {'p99 ms':>7s} {'max ms':>8s}  [slowest 5 appends, ms]")
    ours: dict[str, list[StallRun]] = {"PostgreSQL": [], "SQLite": []}
    for round_ in range(rounds):
        for background in (True, False):
            mode = "background" if background else "inline"
            if use_postgres:
                with postgres_database("stalls") as database:
                    run = run_stalls(pg_store_url(database), f"PostgreSQL, {mode} checkpoint", series, head_minutes,
                                     pace_ms, background)
                print(run.line(), flush=True)
                if background:
                    ours["PostgreSQL"].append(run)
            path = tmp / f"stalls-{round_}-{mode}.db"
            run = run_stalls(f"sqlite:///{path}", f"SQLite, {mode} checkpoint", series, head_minutes, pace_ms, background)
            print(run.line(), flush=True)
            path.unlink(missing_ok=True)
            if background:
                ours["SQLite"].append(run)
    out = []
    for backend, runs in ours.items():
        p99_name = f"append p99 through a 2 h boundary, {backend}, background checkpoint (ms)"
        jitter_name = f"scrape cadence jitter p99 through a 2 h boundary, {backend} (fraction of the interval)"
        if not runs:
            why = f"{backend} not reachable"
            out += [skipped(p99_name, P99_GOAL_MS, False, why), skipped(jitter_name, JITTER_GOAL, False, why)]
            continue
        out += [
            Target.median_of(p99_name, [r.p99_ms for r in runs], P99_GOAL_MS, False).line(),
            Target.median_of(jitter_name, [r.jitter_p99 for r in runs], JITTER_GOAL, False).line(),
        ]
    return out
