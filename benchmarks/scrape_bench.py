"""Scrape benchmark: CPU per million samples stored by ``infermeter up`` scraping N loopback targets,
side by side with Prometheus scraping the same targets at the same interval.

One run, one system after the other (never both at once, so neither steals the other's cores):

1. a separate process (:mod:`benchmarks.scrape_targets`) serves N targets on N loopback ports, half
   dcgm-exporter-shaped, half vLLM-shaped, each about ``--series`` series, values changing every scrape;
2. ``infermeter up`` with a temp SQLite store, NVML off, scraping the N targets; after ``--warmup``
   seconds and then every ``--duration`` seconds (``--repeats`` windows) it reads the process's CPU
   time (user + system, children excluded) and ``infermeter_store_samples_appended_total``;
3. Prometheus (``/usr/bin/prometheus``) with a temp TSDB, same targets, same windows, counting its own
   ``prometheus_tsdb_head_samples_appended_total`` (which includes the 5 synthetic series it
   writes per target and scrape: up, scrape_duration_seconds, ...).

The measured span is ``--repeats`` back-to-back windows of ``--duration`` seconds each; the
target is the median over the windows of ours / Prometheus CPU per million samples stored (window
i of ours against window i of Prometheus), printed with its range. Ends with
``target scrape_cpu_vs_prometheus: <median> [<low>..<high>, median of <n>] (goal <= 0.5) PASS|SHORT`` and
``target scrape_rss_vs_prometheus: <ratio> (goal <= 0.5)``, the ratio of each side's median RSS over its
last window (read every half second; the RSS at the end is printed too); the store's memory by part is printed
after our run (``infermeter_store_memory_bytes``), and before the runs the Python objects the scrape
path keeps per series, by stage (:mod:`benchmarks.scrape_objects`).

The windows open after ``--warmup`` (default 600 s): the memory goal is per active series after
ten minutes at 1 s, and at 100 k series only then does the store run as it will for hours. For its
first five minutes every sample is inside the out-of-order window, nothing can be written to
chunks, and a window there measures a store that never checkpoints (0.9-1.0 CPU-s per M stored
here, against ~4 from the ninth minute on, when early checkpoints write a quarter of the head
every ~75 s; RSS 0.7 GiB against 1.1-1.7). Prometheus is measured over the same span of its run.

Ours runs with its default alert rules unless ``--rules off``: the synthetic targets' random
values set off thousands of alerts (ECC, XID, temperature), and evaluating and notifying them is
part of our process's CPU, while the Prometheus compared here has no rule files. ``--rules off``
measures the like-for-like case: scrape, parse, map and store.

Run from the repository root:
``.venv/bin/python -m benchmarks.scrape_bench [--quick] [--repeats 3] [--targets 100] [--series 1000]``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.scrape_bench")

import argparse
import json
import math
import os
import signal
import subprocess
from pathlib import Path

import httpx
import psutil

from benchmarks import scrape_objects
from benchmarks._common import (
    MIB,
    Target,
    add_repeats,
    bench_parser,
    free_port,
    scratch_dir,
    section,
    skipped,
    spread,
)
from benchmarks.scrape_measure import (
    PROMETHEUS,
    cpu_s,
    ensure_prometheus,
    metric_by_label,
    metric_value,
    page_value,
    prom_query,
    running,
    serving,
    tail,
    windows,
)
from benchmarks.scrape_result import Result, print_mappings, print_memory, print_thread_cpu

REPO = Path(__file__).resolve().parent.parent
GOAL = 0.5  # raised from 1.5 once met (0.64x)
TARGET_NAME = "scrape_cpu_vs_prometheus"
RSS_GOAL = 0.5
RSS_TARGET_NAME = "scrape_rss_vs_prometheus"


# -- the two systems ----------------------------------------------------------------------------
def our_failures(client: httpx.Client) -> tuple[int, int]:
    active = client.get("/api/v1/targets").json()["data"]["activeTargets"]
    return sum(int(t["scrapes"]) for t in active), sum(int(t["failures"]) for t in active)


def fmt_duration(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def run_ours(args: argparse.Namespace, urls: list[str], tmp: Path) -> Result:
    section("2. infermeter up")
    port = free_port()
    config = {
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"url": f"sqlite:///{tmp / 'ours.sqlite'}"},
        "gpu": {"nvml": "off"},
        "logging": {"level": "WARNING"},
        # the reference worker is a load source of its own: not part of this comparison
        "worker": {"embedded": False},
        "scrape": {
            "interval": fmt_duration(args.interval_ms),
            "timeout": fmt_duration(args.timeout_ms),
            "targets": [{"job": "bench", "urls": urls, "engine": args.engine}],
        },
    }
    if args.rules == "off":
        config["alerts"] = {"default_rules": False}
    path = tmp / "infermeter.yaml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    cmd = [str(REPO / ".venv" / "bin" / "infermeter"), "--config", str(path), "up", "--port", str(port)]
    log = tmp / "ours.log"
    with serving(cmd, log, tmp, port, "/ready", "infermeter up") as (proc, client, ps):
        edges: list[tuple[int, int]] = []
        threads: list[dict[str, float]] = []

        def read() -> float:
            edges.append(our_failures(client))
            page = client.get("/metrics").text  # rendered by the process measured: once an edge
            threads.append(metric_by_label(page, "infermeter_thread_cpu_seconds_total", "thread"))
            return page_value(page, "infermeter_store_samples_appended_total")

        rss_window: list[int] = []
        points = windows(ps, read, args.warmup, args.duration, args.repeats, rss_window)
        p0, p1 = points[0], points[-1]
        (s0, f0), (s1, f1) = edges[-len(points)], edges[-1]  # the span's two edges
        stored_series = metric_value(client, "infermeter_store_series")
        rss = ps.memory_info().rss
        metrics = client.get("/metrics").text.splitlines()
        lags = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics
            if line.startswith("infermeter_scrape_loop_lag_seconds{")
        ]
        print_memory(rss, stored_series, metrics)
        print_mappings(ps)
        print_thread_cpu(threads[-len(points)], threads[-1], p1.cpu - p0.cpu)
    scrapes = s1 - s0
    note = (
        f"{scrapes:,} scrapes in the windows ({scrapes / (p1.wall - p0.wall):.1f}/s, "
        f"expected {len(urls) * 1000 / args.interval_ms:.1f}/s); "
        f"since start {s1:,} scrapes, {f1:,} failed; "
        f"loop lag max {max(lags, default=float('nan')):.2f} s; "
        f"{stored_series:,.0f} series in the store (engine: {args.engine}; alert rules: {args.rules})"
    )
    if proc.returncode not in (0, None, -signal.SIGINT):
        note += f"; exit code {proc.returncode}"
    failed_share = (f1 - f0) / scrapes if scrapes else float("nan")
    scraped = float((scrapes - (f1 - f0)) * args.series)
    return Result.over("infermeter", points, rss, failed_share, scraped, note, rss_window)


def run_prometheus(args: argparse.Namespace, binary: str, hostports: list[str], tmp: Path) -> Result:
    section("3. Prometheus")
    port = free_port()
    config = {
        "global": {
            "scrape_interval": fmt_duration(args.interval_ms),
            "scrape_timeout": fmt_duration(args.timeout_ms),
        },
        "scrape_configs": [{"job_name": "bench", "static_configs": [{"targets": hostports}]}],
    }
    path = tmp / "prometheus.yml"
    path.write_text(json.dumps(config, indent=2))
    (tmp / "tsdb").mkdir()
    cmd = [
        binary,
        f"--config.file={path}",
        f"--storage.tsdb.path={tmp / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    version = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    log = tmp / "prometheus.log"
    rss_window: list[int] = []
    with serving(cmd, log, tmp, port, "/-/ready", "prometheus") as (proc, client, ps):
        points = windows(
            ps,
            lambda: metric_value(client, "prometheus_tsdb_head_samples_appended_total"),
            args.warmup,
            args.duration,
            args.repeats,
            rss_window,
        )
        p0, p1 = points[0], points[-1]
        rss = ps.memory_info().rss
        span = f"{int(p1.wall - p0.wall)}s"
        total = prom_query(client, f"sum(count_over_time(up[{span}]))")
        ok = prom_query(client, f"sum(sum_over_time(up[{span}]))")
        per_scrape = prom_query(client, "sum(scrape_samples_scraped)")
        scraped = prom_query(client, f"sum(sum_over_time(scrape_samples_scraped[{span}]))")
    note = (
        f"{version[0] if version else binary}; {total:,.0f} scrapes in the windows; "
        f"{per_scrape:,.0f} samples per round of scrapes (+5 synthetic series per target)"
    )
    failed_share = (total - ok) / total if total else float("nan")
    return Result.over("prometheus", points, rss, failed_share, scraped, note, rss_window)


# -- main ---------------------------------------------------------------------------------------
def parse_interval_ms(text: str) -> int:
    text = text.strip()
    if text.endswith("ms"):
        return int(float(text[:-2]))
    return int(float(text.removesuffix("s")) * 1000)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__spec__.name, __doc__, "short warmup and windows (5 s + 3 x 5 s)", whole_doc=True)
    add_repeats(parser, what="system (back-to-back windows)")
    parser.add_argument("--targets", type=int, default=100, help="loopback targets (default 100)")
    parser.add_argument("--series", type=int, default=1000, help="series per target (default 1000)")
    parser.add_argument("--interval", default="1s", help="scrape interval, e.g. 1s or 500ms (default 1s)")
    parser.add_argument("--warmup", type=float, help="seconds before the window opens (default 600, quick 5)")
    parser.add_argument(
        "--duration", type=float, help="seconds of each measured window (default 60, quick 5)"
    )
    parser.add_argument(
        "--engine",
        default="auto",
        choices=["auto", "none"],
        help="our scrape job's engine option: auto also stores canonical series mapped from vLLM/dcgm names "
        "(more samples stored per scrape); none stores the raw series only, like Prometheus (default auto)",
    )
    parser.add_argument(
        "--rules",
        default="default",
        choices=["default", "off"],
        help="our default alert rules (evaluated on the scraped series, with their notifications): default "
        "runs them as shipped; off switches them off, so that ours, like the Prometheus it is compared with "
        "(no rule files), only scrapes and stores (default: default)",
    )
    parser.add_argument("--no-prometheus", action="store_true", help="skip the Prometheus comparison")
    args = parser.parse_args(argv)
    args.warmup = args.warmup if args.warmup is not None else (5.0 if args.quick else 600.0)
    args.duration = args.duration if args.duration is not None else (5.0 if args.quick else 60.0)
    args.interval_ms = parse_interval_ms(args.interval)
    args.timeout_ms = max(1, args.interval_ms * 4 // 5)
    total_series = args.targets * args.series

    print(
        f"scrape benchmark: {args.targets} targets x {args.series} series = {total_series:,} series, "
        f"every {fmt_duration(args.interval_ms)} (timeout {fmt_duration(args.timeout_ms)}); "
        f"warmup {args.warmup:g} s, {args.repeats} windows of {args.duration:g} s; {os.cpu_count()} CPUs"
    )
    scrape_objects.report(min(args.targets, 20), args.series)  # in this process, before the runs
    results: list[Result] = []
    prom_skip: str | None = "--no-prometheus" if args.no_prometheus else None
    with scratch_dir("infermeter-scrape-bench-") as tmp:
        section("1. targets")
        target_cmd = [
            sys.executable,
            "-m",
            "benchmarks.scrape_targets",
            "--targets",
            str(args.targets),
            "--series",
            str(args.series),
        ]
        with running(target_cmd, tmp / "targets.log", REPO, pipe_stdout=True) as targets_proc:
            assert targets_proc.stdout is not None
            line = targets_proc.stdout.readline()
            if not line:
                print(tail(tmp / "targets.log"))
                raise SystemExit("the target server exited before listening")
            ports: dict[str, list[int]] = json.loads(line)
            hostports = [f"127.0.0.1:{p}" for kind in ("dcgm", "vllm") for p in ports[kind]]
            urls = [f"http://{hp}/metrics" for hp in hostports]
            with httpx.Client(timeout=10.0) as probe:
                sizes = {
                    kind: len(probe.get(f"http://127.0.0.1:{ports[kind][0]}/metrics").content)
                    for kind in ports
                    if ports[kind]
                }
            print(
                f"{len(ports['dcgm'])} dcgm-shaped + {len(ports['vllm'])} vLLM-shaped targets in pid {targets_proc.pid}; "
                + ", ".join(f"{k} body {v / 1024:.0f} KiB" for k, v in sizes.items())
            )
            tps = psutil.Process(targets_proc.pid)

            t_cpu0 = cpu_s(tps)
            ours = run_ours(args, urls, tmp)
            ours.print(total_series)
            results.append(ours)
            print(f"  target server CPU during this run: {cpu_s(tps) - t_cpu0:.1f} s")

            if prom_skip is None:
                binary = ensure_prometheus()
                if binary is None:
                    prom_skip = f"Prometheus not installed: no {PROMETHEUS}, Debian package prometheus"
                    print(f"Prometheus: SKIP ({prom_skip})")
                else:
                    t_cpu0 = cpu_s(tps)
                    prom = run_prometheus(args, binary, hostports, tmp)
                    prom.print(total_series)
                    results.append(prom)
                    print(f"  target server CPU during this run: {cpu_s(tps) - t_cpu0:.1f} s")
            else:
                print("\nPrometheus: SKIP (--no-prometheus)")

    section("summary")
    for r in results:
        print(
            f"  {r.name:<11} {r.cpu_per_m:8.2f} CPU s per M samples  {r.samples / r.wall_s:10,.0f} samples/s  "
            f"{r.cpu_per_m_scraped:6.2f} per M scraped  RSS {r.rss / MIB:7.1f} MiB ({r.rss / total_series:,.0f} B/series)  failed {100 * r.failed_share:.2f} %"
        )
    if prom_skip is not None or len(results) < 2:
        print(skipped(TARGET_NAME, GOAL, False, prom_skip or "no Prometheus result"))
        print(skipped(RSS_TARGET_NAME, RSS_GOAL, False, prom_skip or "no Prometheus result"))
        return 0
    ratios = [o / p for o, p in zip(results[0].window_cpu_per_m, results[1].window_cpu_per_m)]
    if not ratios or not all(math.isfinite(r) and r > 0 for r in ratios):
        print(skipped(TARGET_NAME, GOAL, False, "no samples counted in a window"))
        return 1
    ratio = results[0].cpu_per_m / results[1].cpu_per_m
    ratio_scraped = results[0].cpu_per_m_scraped / results[1].cpu_per_m_scraped
    print(
        f"ours / Prometheus CPU per sample stored: {ratio:.2f}x over all windows, window by window "
        f"{spread(ratios)}; per sample scraped: {ratio_scraped:.2f}x"
    )
    print(Target.median_of(TARGET_NAME, ratios, GOAL, higher_is_better=False).line())
    # Each side's median RSS over its last window (merges, checkpoints and Go's collector make
    # a single reading at the end swing by a quarter); the end readings are printed above.
    print(f"RSS, median of the last window: ours {results[0].rss_median / MIB:.1f} MiB, "
          f"Prometheus {results[1].rss_median / MIB:.1f} MiB; at the end: {results[0].rss / MIB:.1f} / "
          f"{results[1].rss / MIB:.1f} MiB ({results[0].rss / results[1].rss:.2f}x)")
    print(Target(RSS_TARGET_NAME, results[0].rss_median / results[1].rss_median, RSS_GOAL, False).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
