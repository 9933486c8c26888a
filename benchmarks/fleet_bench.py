"""Fleet benchmark: the node agent against vmagent, a simulated GPU fleet shipping into a real
VictoriaMetrics, and the default rule pack evaluated on that engine against vmalert.

1. Agent vs vmagent, both running at once on the same loopback targets (half dcgm-exporter-shaped,
   half vLLM-shaped, ``--series`` each, every ``--interval``), both remote-writing to one
   VictoriaMetrics: CPU seconds (user + system) per million samples the receiver acknowledged
   (ours: ``infermeter_agent_samples_sent_total``; vmagent: ``vmagent_remotewrite_block_size_rows_sum``),
   and RSS, in the same windows. Ours ships the raw series (``engine: none``), as vmagent does.
2. A simulated fleet: ``--nodes`` nodes (8 GPUs each: one dcgm-shaped and one vLLM-shaped target a
   node), ``--agents`` agent processes (several nodes each, canonical mapping on), every
   ``--fleet-interval``, into VictoriaMetrics. Sustained samples/s from the engine's own counter;
   delay per scrape from polling the engine every second for each target's newest ``up`` sample:
   a scrape counts as delayed when it is not queryable within 2 scrape intervals of its timestamp.
3. The default rule pack on the engine while the fleet ships: ours (the rules engine with a
   :class:`remote.RemoteSource`, each rule one PromQL instant query to the engine) against vmalert
   with the same rules (``infermeter rules export-prometheus``) every ``--rules-interval``: the
   time to evaluate the whole pack once (sum over groups of the mean group evaluation time).

Targets (median over ``--repeats`` windows, each window's ratio measured side by side):
``agent_cpu_vs_vmagent`` <= 1.0, ``agent_rss_vs_vmagent`` <= 2.0, ``fleet_delayed_share`` < 0.01
(printed as a percentage, goal <= 1 %), ``rules_eval_vs_vmalert`` <= 1.0.

Run from the repository root:
``.venv/bin/python -m benchmarks.fleet_bench [--quick] [--repeats 3] [--nodes 128] [--agents 4]``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.fleet_bench")

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from benchmarks._common import (
    MIB,
    Target,
    add_repeats,
    bench_parser,
    dir_bytes,
    scratch_dir,
    section,
    skipped,
    spread,
)
from benchmarks._victoriametrics import VictoriaMetrics
from benchmarks.fleet_procs import (
    VMAGENT,
    VMALERT,
    agent,
    agent_sent,
    targets,
    vmagent,
    vmagent_sent,
    vmalert,
    vmalert_iterations,
    vmalert_rules,
)
from benchmarks.fleet_rules import our_pack_seconds
from benchmarks.fleet_watch import ScrapeWatch
from benchmarks.scrape_measure import cpu_s

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Edge:
    wall: float
    cpu: float
    samples: float
    rss: int


def measure(procs: Sequence[tuple[psutil.Process, Callable[[], float]]], warmup_s: float, duration_s: float,
            count: int) -> list[list[Edge]]:
    """For each process, the edges of ``count`` back-to-back windows after ``warmup_s`` (counted
    from when every process has sent its first sample), all taken at the same moments."""
    deadline = time.monotonic() + 60
    while not all(read() > 0 for _, read in procs) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(warmup_s)

    def edges() -> list[Edge]:
        return [Edge(time.monotonic(), cpu_s(ps), float(read()), ps.memory_info().rss) for ps, read in procs]

    taken = [edges()]
    for _ in range(count):
        time.sleep(duration_s)
        taken.append(edges())
    return [list(column) for column in zip(*taken)]


def per_million(edges: list[Edge]) -> list[float]:
    return [(b.cpu - a.cpu) / ((b.samples - a.samples) / 1e6) if b.samples > a.samples else float("inf")
            for a, b in zip(edges, edges[1:])]


def report(name: str, edges: list[Edge]) -> None:
    wall = edges[-1].wall - edges[0].wall
    sent = edges[-1].samples - edges[0].samples
    cpu = edges[-1].cpu - edges[0].cpu
    print(f"  {name:<9} {sent / wall:10,.0f} samples/s shipped  CPU {100 * cpu / wall:5.1f}% of a core  "
          f"{spread(per_million(edges))} CPU s per M  RSS {edges[-1].rss / MIB:6.1f} MiB")


# -- 1. agent vs vmagent -------------------------------------------------------------------------
def agent_vs_vmagent(args: argparse.Namespace, vm: VictoriaMetrics, tmp: Path) -> list[str]:
    section(f"1. agent vs vmagent: {args.targets} targets x {args.series} series every {args.interval_ms} ms")
    names = ("agent_cpu_vs_vmagent", "agent_rss_vs_vmagent")
    if not os.access(VMAGENT, os.X_OK):
        return [skipped(n, g, False, f"no {VMAGENT} (Debian package victoria-metrics)") for n, g in zip(names, (1.0, 2.0))]
    receiver = f"{vm.url}/api/v1/write"
    # Both at once on the same targets, windows taken at the same moments: this machine's
    # drift (other tenants, clock changes) then falls on both alike. Run one after the other,
    # vmagent's own figure moved from 2.45 to 3.9 CPU-s per M between runs.
    with targets(args.targets, args.series, tmp) as tg:
        with agent("ours", tg.urls, receiver, args.interval_ms, "none", tmp) as (ours_client, ours_ps), \
                vmagent(tg.hostports, receiver, args.interval_ms, tmp) as (theirs_client, theirs_ps):
            ours, theirs = measure([(ours_ps, lambda: agent_sent(ours_client)),
                                    (theirs_ps, lambda: vmagent_sent(theirs_client))],
                                   args.warmup, args.duration, args.repeats)
        report("ours", ours)
        report("vmagent", theirs)
    cpu = [o / t for o, t in zip(per_million(ours), per_million(theirs))]
    rss = [o.rss / t.rss for o, t in zip(ours[1:], theirs[1:])]
    return [Target.median_of(names[0], cpu, 1.0, higher_is_better=False).line(),
            Target.median_of(names[1], rss, 2.0, higher_is_better=False).line()]


# -- 2 and 3. the simulated fleet and the rule pack ------------------------------------------------
def fleet_and_rules(args: argparse.Namespace, vm: VictoriaMetrics, tmp: Path) -> list[str]:
    n_targets = args.nodes * 2
    section(f"2. fleet: {args.nodes} nodes x 8 GPUs ({n_targets} targets x {args.fleet_series} series), "
            f"{args.agents} agents, every {args.fleet_interval_ms} ms")
    receiver = f"{vm.url}/api/v1/write"
    lines: list[str] = []
    with targets(n_targets, args.fleet_series, tmp) as tg, contextlib.ExitStack() as stack:
        share = -(-len(tg.urls) // args.agents)
        procs = []
        for i in range(args.agents):
            urls = tg.urls[i * share:(i + 1) * share]
            if urls:
                procs.append(stack.enter_context(agent(f"fleet-{i}", urls, receiver, args.fleet_interval_ms, "auto", tmp,
                                                       node=f"agent-{i}")))
        watch = ScrapeWatch(vm.url, args.fleet_interval_ms)
        stack.enter_context(watch.polling())
        time.sleep(args.fleet_warmup)
        edges = []
        for _ in range(args.repeats + 1):
            edges.append((time.time(), vm.metric('vm_rows_inserted_total{type="promremotewrite"}'),
                          sum(cpu_s(ps) for _, ps in procs)))
            if len(edges) <= args.repeats:
                time.sleep(args.fleet_duration)
        # scrapes of the last window need 2 intervals to count as on time
        time.sleep(2 * args.fleet_interval_ms / 1000 + 2)
        shares, rates = [], []
        for (t0, rows0, cpu0), (t1, rows1, cpu1) in zip(edges, edges[1:]):
            delayed, total = watch.delayed(t0, t1)
            shares.append(delayed / total if total else float("nan"))
            rates.append((rows1 - rows0) / (t1 - t0))
            print(f"  window: {(rows1 - rows0) / (t1 - t0):9,.0f} samples/s into the engine, {total} scrapes, "
                  f"{delayed} delayed past {2 * args.fleet_interval_ms / 1000:g} s; agents' CPU "
                  f"{100 * (cpu1 - cpu0) / (t1 - t0):.0f}% of a core")
        print(f"  delay of scrapes on time: p50 {watch.quantile(0.5):.2f} s, p99 {watch.quantile(0.99):.2f} s")
        print(f"  sustained: {spread(rates)} samples/s")
        sizing(vm, procs, edges, n_targets * args.fleet_series)
        lines.append(Target.median_of("fleet_delayed_share_pct", [100 * s for s in shares], 1.0,
                                      higher_is_better=False).line())
        lines.append(rules_vs_vmalert(args, vm, tmp))
    return lines


def sizing(vm: VictoriaMetrics, procs: Sequence[tuple[object, psutil.Process]], edges: list[tuple[float, float, float]],
           scraped_series: int) -> None:
    """The per-series and per-sample figures docs/capacity.md is derived from."""
    (_, rows0, cpu0), (_, rows1, cpu1) = edges[0], edges[-1]
    vm.http.get("/internal/force_flush")
    series = vm.http.get("/api/v1/query", params={"query": 'count({job="fleet"})'}).json()["data"]["result"]
    active = float(series[0]["value"][1]) if series else float("nan")
    rows_total = vm.metric('vm_rows_inserted_total{type="promremotewrite"}')
    vm_rss = psutil.Process(vm.proc.pid).memory_info().rss
    agent_rss = [ps.memory_info().rss for _, ps in procs]
    print(f"  sizing: {active:,.0f} active series in the engine ({scraped_series:,} scraped + per-target and mapped ones)")
    print(f"    agents: {(cpu1 - cpu0) / ((rows1 - rows0) / 1e6):.2f} CPU s per M samples, "
          f"RSS {statistics.mean(agent_rss) / MIB:.0f} MiB each ({len(procs)} agents, "
          f"{statistics.mean(agent_rss) / (active / len(procs)):,.0f} B per series shipped)")
    print(f"    engine: RSS {vm_rss / MIB:.0f} MiB ({vm_rss / active:,.0f} B per active series), "
          f"{dir_bytes(vm.storage) / rows_total:.2f} bytes per sample on disk after {rows_total:,.0f} samples "
          f"(not yet merged down)")


def rules_vs_vmalert(args: argparse.Namespace, vm: VictoriaMetrics, tmp: Path) -> str:
    section(f"3. the default rule pack on the engine, ours vs vmalert (every {args.rules_interval_ms} ms)")
    name = "rules_eval_vs_vmalert"
    if not os.access(VMALERT, os.X_OK):
        return skipped(name, 1.0, False, f"no {VMALERT} (Debian package victoria-metrics)")
    exported = tmp / "exported"
    exported.mkdir(exist_ok=True)
    os.system(f"{REPO / '.venv/bin/infermeter'} rules export-prometheus --out {exported} > /dev/null")
    rules = vmalert_rules(exported / "infermeter-rules.yml", tmp / "vmalert-rules.yml", args.rules_interval_ms)
    ours = our_pack_seconds(vm.url, tmp, args.repeats, args.rules_duration, args.rules_interval_ms)
    theirs = []
    with vmalert(rules, vm.url, args.rules_interval_ms, tmp) as client:
        time.sleep(args.rules_warmup)
        before = vmalert_iterations(client)
        for _ in range(args.repeats):
            time.sleep(args.rules_duration)
            after = vmalert_iterations(client)
            theirs.append(sum((after[g][0] - before.get(g, (0, 0))[0]) / (after[g][1] - before.get(g, (0, 0))[1])
                              for g in after if after[g][1] > before.get(g, (0, 0))[1]))
            before = after
    print(f"  ours     {spread([1000 * s for s in ours])} ms per evaluation of the pack")
    print(f"  vmalert  {spread([1000 * s for s in theirs])} ms per evaluation of the pack")
    return Target.median_of(name, [o / t for o, t in zip(ours, theirs)], 1.0, higher_is_better=False).line()


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__spec__.name, __doc__, "fewer targets and nodes, short windows", whole_doc=True)
    add_repeats(parser, what="ratio (back-to-back windows)")
    parser.add_argument("--targets", type=int, help="targets of part 1 (default 20, quick 6)")
    parser.add_argument("--series", type=int, default=1000, help="series per target in part 1 (default 1000)")
    parser.add_argument("--nodes", type=int, help="simulated GPU nodes in part 2 (default 128, quick 16)")
    parser.add_argument("--agents", type=int, help="agent processes sharing the nodes (default 4, quick 2)")
    parser.add_argument("--fleet-series", type=int, default=320, help="series per target in part 2 (default 320)")
    parser.add_argument("--only", choices=["agent", "fleet"], help="run part 1 (agent) or parts 2 and 3 (fleet) only")
    args = parser.parse_args(argv)
    quick = args.quick
    args.targets = args.targets or (6 if quick else 20)
    args.nodes = args.nodes or (16 if quick else 128)
    args.agents = args.agents or (2 if quick else 4)
    args.interval_ms = 1000
    args.warmup, args.duration = (5.0, 8.0) if quick else (15.0, 45.0)
    args.fleet_interval_ms = 5000 if quick else 15_000
    args.fleet_warmup, args.fleet_duration = (10.0, 15.0) if quick else (45.0, 60.0)
    args.rules_interval_ms = 5000
    args.rules_warmup, args.rules_duration = (6.0, 12.0) if quick else (10.0, 30.0)
    print(f"fleet benchmark: {os.cpu_count()} CPUs, {args.repeats} windows per figure")
    if not VictoriaMetrics.available():
        print("no /usr/bin/victoria-metrics (Debian package victoria-metrics): nothing to measure")
        for n, g in (("agent_cpu_vs_vmagent", 1.0), ("agent_rss_vs_vmagent", 2.0), ("fleet_delayed_share_pct", 1.0),
                     ("rules_eval_vs_vmalert", 1.0)):
            print(skipped(n, g, False, "no VictoriaMetrics"))
        return 0
    lines: list[str] = []
    with scratch_dir("infermeter-fleet-bench-") as tmp:
        if args.only != "fleet":
            with VictoriaMetrics(tmp / "vm-agents") as vm:
                lines += agent_vs_vmagent(args, vm, tmp)
        if args.only != "agent":
            with VictoriaMetrics(tmp / "vm-fleet") as vm:
                lines += fleet_and_rules(args, vm, tmp)
    section("targets")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
