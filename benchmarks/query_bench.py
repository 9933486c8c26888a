"""Query benchmark: Grafana-style PromQL range queries on the same samples, answered by
infermeter's /api/v1/query_range, by Prometheus 2.42 (Debian package, the samples backfilled
as TSDB blocks with ``promtool tsdb create-blocks-from openmetrics``) and, when the Debian
``victoria-metrics`` package is installed, by VictoriaMetrics (``/api/v1/import``).

Data: a GPU fleet in dcgm-exporter's names (a third utilisation, a third power, a third energy
counters; 8 GPUs a host), 15 s apart. Queries: the panels of a GPU fleet dashboard (fleet and
per-host averages, power from the energy counter, top-k, quantiles, a one-host panel, windowed
aggregates) plus range queries of the conformance corpus's kinds, each over the last hour of
the data at a 60 s step, as Grafana asks. Each query is answered once first (printed as "first"
for the first round, when no cache of any engine holds its data yet; infermeter then keeps the
decoded chunks), then ``--repeats`` more times: p50 and p95 per query and engine over HTTP (body
read).

Run from the repository root:

    .venv/bin/python -m benchmarks.query_bench [--quick] [--series 100000] [--repeats 10]

``--quick``: 6,000 series, 5 repeats. Three rounds (``--rounds``), both engines answering side
by side in each. Ends with one ``target`` line: the median over the rounds of the geometric
mean over the queries of infermeter's p95 / Prometheus's p95 (goal <= 1.0; moonshot 0.5), with
its range; the worst query's ratio is printed above it.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.query_bench")

import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import numpy as np

from benchmarks._common import (
    ENERGY,
    HOUR_MS,
    POWER,
    UTIL,
    Fleet,
    Target,
    bench_parser,
    mixed_fleet,
    recent_hour,
    scratch_dir,
    section,
    skipped,
)
from benchmarks._victoriametrics import VictoriaMetrics
from tests.prometheus_blocks import PrometheusMissing, backfill, prometheus, write_openmetrics

STEP_MS = 60_000
QUERIES = [
    f"avg(avg by (Hostname) ({UTIL}))",
    f"avg by (Hostname) ({UTIL})",
    f"sum(rate({ENERGY}[5m])) / 1000",
    f"sum by (Hostname) (rate({ENERGY}[1m])) / 1000",
    f"topk(10, {POWER})",
    f"quantile(0.9, {UTIL})",
    f'{UTIL}{{Hostname="gpu-node-001"}}',
    f"count({UTIL} < 30)",
    f'max_over_time({POWER}{{Hostname=~"gpu-node-00.*"}}[5m])',
    f"avg(avg_over_time({UTIL}[5m]))",
    f"sum by (Hostname) ({POWER}) / on(Hostname) group_left count by (Hostname) ({POWER})",
    f'histogram_quantile(0.9, sum by (le) (label_replace({UTIL}, "le", "$1", "gpu", "(.*)")))',
    f"max_over_time(avg({UTIL})[10m:1m])",
]


def timings(post: Callable[[str], httpx.Response], query: str, repeats: int) -> list[float]:
    """The first (cold) answer's time, then ``repeats`` timed answers."""
    t = time.perf_counter()
    reply = post(query)  # cold: infermeter decodes the chunks it then keeps in its chunk cache
    cold = time.perf_counter() - t
    if reply.status_code != 200 or reply.json().get("status") != "success":
        raise RuntimeError(f"{query}: {reply.status_code} {reply.text[:300]}")
    out = [cold]
    for _ in range(repeats):
        t = time.perf_counter()
        reply = post(query)
        reply.read()
        out.append(time.perf_counter() - t)
    return out


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


@contextmanager
def prometheus_for(fleet: Fleet, work: Path) -> Iterator[str]:
    om = work / "data.om"
    write_openmetrics(((key, fleet.ts_ms, fleet.values[i]) for i, key in enumerate(fleet.keys)), om)
    backfill(om, work / "tsdb")
    om.unlink()
    with prometheus(work / "tsdb", work) as base:
        yield base


def start_infermeter(fleet: Fleet, work: Path) -> tuple[Callable[[], None], str]:
    """The service on a fresh SQLite store, the fleet appended through its store as scrapes
    would be (one timestamp of every series per append): recent data lives in the head, as it
    does for a dashboard's last hour."""
    from contextlib import ExitStack

    from infermeter import db
    from infermeter.settings import GpuSettings, Settings, StoreSettings
    from store import create_store_engine
    from store.clock import ManualClock
    from store.types import SampleBatch
    from tests.service import serve

    url = f"sqlite:///{work / 'infermeter.db'}"
    engine = create_store_engine(url)
    db.upgrade(engine)
    engine.dispose()
    end = int(fleet.ts_ms[-1])
    clock = ManualClock(int(fleet.ts_ms[0]))
    stack = ExitStack()
    settings = Settings(store=StoreSettings(url=url), gpu=GpuSettings(nvml="off"))
    base, runtime = stack.enter_context(serve(settings, clock))
    ids = runtime.store.resolve(fleet.keys)
    index = np.arange(fleet.n_series, dtype=np.int64)
    for j in range(fleet.n_points):
        clock.set(int(fleet.ts_ms[j]))
        runtime.store.append(SampleBatch(fleet.keys, index, np.full(fleet.n_series, fleet.ts_ms[j], np.int64),
                                         fleet.values[:, j].copy(), ids))
    clock.set(end)
    from infermeter.gc_tuning import tune_for_service

    tune_for_service()  # as `infermeter up` does
    return stack.close, base


def main() -> int:
    parser = bench_parser(__spec__.name, __doc__, "6,000 series, 5 repeats")
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=10, help="timed runs of each query per round (after a cold one)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the target is the median of their geometric means")
    args = parser.parse_args()
    if args.quick:
        args.series, args.repeats = 6_000, 5
    end_ms = recent_hour()
    points = int((65 * 60_000) // 15_000) + 1
    fleet = mixed_fleet(args.series, points, end_ms - (points - 1) * 15_000)
    start, end = int(fleet.ts_ms[-1]) - HOUR_MS, int(fleet.ts_ms[-1])
    form = {"start": f"{start / 1000:.3f}", "end": f"{end / 1000:.3f}", "step": f"{STEP_MS / 1000:g}"}
    section(f"{args.series:,} series x {points} points ({fleet.samples:,} samples); range 1 h, step 60 s")
    # runs[round][query][engine] = the round's timings; the engines answer side by side
    runs: list[dict[str, dict[str, list[float]]]] = []
    with scratch_dir("query-bench") as work, ExitStack() as stack:
        t = time.perf_counter()
        stop_ours, ours = start_infermeter(fleet, work)
        print(f"infermeter loaded in {time.perf_counter() - t:.1f} s")
        try:
            t = time.perf_counter()
            prom = stack.enter_context(prometheus_for(fleet, work))
            print(f"Prometheus loaded in {time.perf_counter() - t:.1f} s")
        except (PrometheusMissing, RuntimeError) as exc:
            stop_ours()
            print(skipped("query_p95_vs_prometheus_geomean", 1.0, False, str(exc)))
            return 0
        vm = VictoriaMetrics(work / "vm") if VictoriaMetrics.available() else None
        if vm is not None:
            vm.import_fleet(fleet)
            vm.flush_and_merge()
        else:
            print("VictoriaMetrics: not installed (Debian package victoria-metrics); left out")
        try:
            with httpx.Client(base_url=ours, timeout=600) as a, httpx.Client(base_url=prom, timeout=600) as b:
                engines: dict[str, Callable[[str], httpx.Response]] = {
                    "infermeter": lambda e: a.post("/api/v1/query_range", data={"query": e, **form}),
                    "prometheus": lambda e: b.post("/api/v1/query_range", data={"query": e, **form}),
                }
                if vm is not None:
                    engines["victoriametrics"] = lambda e: vm.query_range(e, start, end, STEP_MS)
                for _ in range(args.rounds):
                    runs.append({q: {name: timings(post, q, args.repeats) for name, post in engines.items()} for q in QUERIES})
        finally:
            stop_ours()
            stack.close()
            if vm is not None:
                vm.stop()
    # p50 and p95 of the last round's timed answers; "first": the very first answer of each
    # query in the run, before any cache of any engine held its data
    print(f"{'query':<80} {'engine':<16} {'p50 ms':>9} {'p95 ms':>9} {'first ms':>9}")
    geomeans = []
    for r, rnd in enumerate(runs):
        ratios = [p95(rnd[q]["infermeter"][1:]) / p95(rnd[q]["prometheus"][1:]) for q in QUERIES]
        geomeans.append(math.exp(sum(math.log(x) for x in ratios) / len(ratios)))
        if r == len(runs) - 1:
            for q, ratio in zip(QUERIES, ratios):
                for engine, (_, *times) in rnd[q].items():
                    first = runs[0][q][engine][0]
                    print(f"{q[:80]:<80} {engine:<16} {statistics.median(times) * 1000:9.1f} {p95(times) * 1000:9.1f} "
                          f"{first * 1000:9.1f}")
                print(f"{'':<80} {'ours / prom p95':<16} {ratio:9.2f}")
            print(f"worst query (last round): {max(ratios):.2f} x Prometheus p95 ({QUERIES[ratios.index(max(ratios))]})")
    print(Target.median_of("query_p95_vs_prometheus_geomean", geomeans, 1.0, higher_is_better=False).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
