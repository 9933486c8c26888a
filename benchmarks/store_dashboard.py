"""Section 3 of :mod:`benchmarks.store_bench`: a dashboard range query against decoding every
chunk with numpy and against VictoriaMetrics ``query_range``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from benchmarks._common import (
    DAY_MS,
    F64,
    HOUR_MS,
    SCRAPE_MS,
    UTIL,
    Fleet,
    Target,
    recent_hour,
    run_times,
    section,
    skipped,
    spread,
    timed,
    util_fleet,
)
from benchmarks._victoriametrics import VM_BINARY, VictoriaMetrics
from benchmarks.store_common import Sizes, close_store, open_store
from benchmarks.store_ingest import feed
from store import ManualClock, RangeQuery, Reader, Selector, TimeSeriesStore
from store.codec import decode

DASHBOARD_RAW_GOAL = 20.0
DASHBOARD_VM_GOAL = 1.0
MINUTE_MS = 60_000


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
            f"SELECT series_id, n, encoding, data FROM chunks WHERE series_id IN ({', '.join([p] * len(sids))}) "
            f"AND end_ms >= {p} AND start_ms <= {p} ORDER BY series_id, start_ms",
            (*sids, origin, end_ms),
        )
        rows = cur.fetchall()
        cur.close()
    finally:
        conn.close()
    row_of = {sid: i for i, sid in enumerate(sids)}
    ts_parts, val_parts, row_parts = [], [], []
    for sid, n, encoding, data in rows:
        ts, val = decode(bytes(data), int(n), int(encoding))
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
    ours_runs: list[float]  # warm: the rollup rows of these series already in the store's cache
    raw_runs: list[float]  # timed alternately with ours_runs, run i next to run i
    cold_s: float  # the rollup cache emptied before every run (median)
    sql_s: float  # the rollup cache switched off: rows folded by the database (median)
    vm_runs: list[float] | None = None
    vm_points: int | None = None

    @property
    def ours_s(self) -> float:
        return statistics.median(self.ours_runs)

    @property
    def raw_s(self) -> float:
        return statistics.median(self.raw_runs)

    @property
    def vm_s(self) -> float | None:
        return statistics.median(self.vm_runs) if self.vm_runs else None

    def raw_ratios(self) -> list[float]:
        """Raw decode time / ours, run by run."""
        return [r / o for o, r in zip(self.ours_runs, self.raw_runs)]

    def vm_ratios(self) -> list[float]:
        """VictoriaMetrics time / ours, run by run."""
        return [v / o for o, v in zip(self.ours_runs, self.vm_runs or [])]


def time_ours_and_raw(store: TimeSeriesStore, query: RangeQuery, sids: list[int], repeats: int) -> QueryTimes:
    """Check that the reader and the raw decode agree, then time both, alternately."""
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
    ours_runs: list[float] = []
    raw_runs: list[float] = []
    for _ in range(repeats):
        ours_runs.append(timed(lambda: reader.range(query))[0])
        raw_runs.append(
            timed(lambda: decode_and_fold(store, sids, query.start_ms, query.end_ms, query.step_ms))[0]
        )
    cache = store.rollup_cache

    def cold() -> None:
        cache.clear()
        reader.range(query)

    cold_s = statistics.median(run_times(cold, repeats))
    budget, cache.max_rows = cache.max_rows, 0
    cache.clear()
    sql_s = statistics.median(run_times(lambda: reader.range(query), repeats))
    cache.max_rows = budget
    return QueryTimes(query.step_ms, ours.shape[1], answer[0].source, ours_runs, raw_runs, cold_s, sql_s)


def time_vm(
    vm: VictoriaMetrics, qt: QueryTimes, start_ms: int, end_ms: int, n_series: int, repeats: int
) -> QueryTimes:
    """``avg_over_time(m[step])`` over the same range and step, timed as HTTP round trips."""
    promql = f"avg_over_time({UTIL}[{qt.step_ms // 1000}s])"
    series = vm.query_range(promql, start_ms, end_ms, qt.step_ms).json()["data"]["result"]
    if len(series) != n_series:
        raise SystemExit(f"VictoriaMetrics returned {len(series)} series, expected {n_series}")
    vm_runs = run_times(lambda: vm.query_range(promql, start_ms, end_ms, qt.step_ms), repeats)
    return replace(qt, vm_runs=vm_runs, vm_points=max(len(s["values"]) for s in series))


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
        else (f"VictoriaMetrics not installed: no {VM_BINARY}" if use_vm else "--no-vm")
    )
    if not vm_note:
        with VictoriaMetrics(tmp / "vm_dashboard") as vm:
            vm.import_fleet(fleet)
            vm.flush_and_merge()
            results = [time_vm(vm, qt, start, end, fleet.n_series, sizes.repeats) for qt in results]

    print(
        f"  {'step':>6} {'pts/series':>10} {'ours ms':>8} {'cold ms':>8} {'no-cache ms':>11} {'source':>12} "
        f"{'raw decode ms':>13} {'raw/ours':>8} {'VM ms':>7} {'VM pts':>6} {'VM/ours':>7}"
    )
    for qt in results:
        vm_ms = f"{qt.vm_s * 1e3:7.1f}" if qt.vm_s is not None else "    n/a"
        vm_ratio = f"{qt.vm_s / qt.ours_s:7.2f}" if qt.vm_s is not None else "    n/a"
        vm_pts = f"{qt.vm_points:6d}" if qt.vm_points is not None else "   n/a"
        print(
            f"  {qt.step_ms // MINUTE_MS:>5}m {qt.points:>10} {qt.ours_s * 1e3:8.1f} {qt.cold_s * 1e3:8.1f} "
            f"{qt.sql_s * 1e3:11.1f} {qt.source:>12} "
            f"{qt.raw_s * 1e3:13.1f} {qt.raw_s / qt.ours_s:8.2f} {vm_ms} {vm_pts} {vm_ratio}"
        )
    print(
        f"  (medians of {sizes.repeats}; ours = rollup rows already in the store's in-memory rollup cache, "
        "as for a dashboard redrawing the same range; cold = that cache emptied before each run; "
        "no-cache = cache off, the database folds the rows; ours and the raw decode agree "
        "(np.allclose, same NaN positions); VM: HTTP round trip with the JSON body read but not parsed, "
        "nocache=1)"
    )
    main = results[0]
    print(f"  raw decode / ours at {main.step_ms // MINUTE_MS} min steps, run by run: {spread(main.raw_ratios())}")
    lines = [
        Target.median_of("dashboard_query_vs_raw_decode", main.raw_ratios(), DASHBOARD_RAW_GOAL, True).line()
    ]
    if main.vm_runs is None:
        lines.append(skipped("dashboard_query_vs_victoriametrics", DASHBOARD_VM_GOAL, True, vm_note))
    else:
        print(f"  VictoriaMetrics / ours, run by run: {spread(main.vm_ratios())}")
        lines.append(
            Target.median_of(
                "dashboard_query_vs_victoriametrics", main.vm_ratios(), DASHBOARD_VM_GOAL, True
            ).line()
        )
    return lines
