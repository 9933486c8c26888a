"""Benchmark: collector.exposition.parse_exposition vs prometheus_client's text parser.

Run from the repository root: ``.venv/bin/python -m benchmarks.parse_bench [--quick] [--repeats 3]``
(about a minute; ``--quick`` fewer scrapes per body).  Bodies are generated here: a
vLLM-shaped one (~5,000 series, many-bucket histograms, several model_name/engine labels), a
dcgm-exporter-shaped one (8 GPUs x 40 fields) and a 100,000-line one.  Every timed parse is
of a fresh scrape of the same target (same series, all values regenerated), so the warm cache
holds only what the previous scrape left.  Reported, as microseconds per sample and the best
over the scrapes: ours with a cold cache, ours with a warm cache, prometheus_client (consuming
every sample), and ours with keep_family dropping half the families.  It checks that ours and
prometheus_client yield identical (name, labels, value) sets, cold and warm.  The whole timing
is done ``--repeats`` times; each target is the median speedup (warm cache vs prometheus_client),
printed with its range: ``target parse_speedup_<body>: <median> [<low>..<high>, median of <n>]
(goal >= 10) PASS|SHORT``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.parse_bench")

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from benchmarks._common import Target, add_repeats, bench_parser, spread
from collector.exposition import SeriesCache, parse_exposition

GOAL = 10.0
Sample = tuple[str, tuple[tuple[str, str], ...], object]


def _fmt(v: float) -> str:
    return repr(float(v))


def vllm_body(seed: int) -> str:
    """prometheus_client-style vLLM /metrics: 8 models x 4 engines, ~5,000 series."""
    rnd = random.Random(seed)
    combos = [(f"org/model-{m}", str(e)) for m in range(8) for e in range(4)]
    out: list[str] = []

    def fam(name: str, typ: str, help_: str) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {typ}")

    for g in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        fam(f"vllm:{g}", "gauge", f"{g.replace('_', ' ')}.")
        for model, eng in combos:
            out.append(f'vllm:{g}{{engine="{eng}",model_name="{model}"}} {_fmt(rnd.random() * 10)}')
    for c in ("prompt_tokens", "generation_tokens", "num_preemptions"):
        fam(f"vllm:{c}_total", "counter", f"Number of {c}.")
        for model, eng in combos:
            out.append(f'vllm:{c}_total{{engine="{eng}",model_name="{model}"}} {_fmt(rnd.randrange(10**9))}')
        fam(f"vllm:{c}_created", "gauge", f"Number of {c}.")
        for model, eng in combos:
            out.append(f'vllm:{c}_created{{engine="{eng}",model_name="{model}"}} 1.7769301736864316e+09')
    fam("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    for model, eng in combos:
        for reason in ("stop", "length", "abort"):
            out.append(
                f'vllm:request_success_total{{engine="{eng}",finished_reason="{reason}",'
                f'model_name="{model}"}} {_fmt(rnd.randrange(10**6))}'
            )
    buckets = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
    for h in ("time_to_first_token_seconds", "e2e_request_latency_seconds",
              "inter_token_latency_seconds", "request_queue_time_seconds",
              "request_prefill_time_seconds", "request_decode_time_seconds"):
        fam(f"vllm:{h}", "histogram", f"Histogram of {h}.")
        for model, eng in combos:
            lbl = f'engine="{eng}",model_name="{model}"'
            count = 0
            for le in buckets:
                count += rnd.randrange(100)
                out.append(f'vllm:{h}_bucket{{{lbl},le="{le}"}} {_fmt(count)}')
            out.append(f'vllm:{h}_bucket{{{lbl},le="+Inf"}} {_fmt(count)}')
            out.append(f"vllm:{h}_count{{{lbl}}} {_fmt(count)}")
            out.append(f"vllm:{h}_sum{{{lbl}}} {_fmt(rnd.random() * 1e4)}")
    return "\n".join(out) + "\n"


def dcgm_body(seed: int) -> str:
    """dcgm-exporter /metrics: 8 GPUs x 40 fields, long label sets, integer/float values."""
    rnd = random.Random(seed)
    out: list[str] = []
    for f in range(40):
        name = f"DCGM_FI_DEV_FIELD_{f:02d}" if f % 5 else f"DCGM_FI_PROF_PIPE_{f:02d}_ACTIVE"
        out.append(f"# HELP {name} Field {f} (in %).")
        out.append(f"# TYPE {name} {'counter' if f % 7 == 0 else 'gauge'}")
        for gpu in range(8):
            value = str(rnd.randrange(100000)) if f % 2 else f"{rnd.random() * 300:.6f}"
            out.append(
                f'{name}{{gpu="{gpu}",UUID="GPU-{gpu:08x}-0da5-6d26-a36a-e7af1ce2586e",'
                f'pci_bus_id="00000000:{gpu:02X}:00.0",device="nvidia{gpu}",modelName="NVIDIA H100 80GB HBM3",'
                f'Hostname="node-a17",DCGM_FI_DRIVER_VERSION="570.86.15"}} {value}'
            )
    return "\n".join(out) + "\n"


def big_body(seed: int) -> str:
    """100,000 lines: 50 gauge families x 1,998 series (pod/container/rank labels)."""
    rnd = random.Random(seed)
    out: list[str] = []
    for f in range(50):
        name = f"fleet_metric_{f}_value"
        out.append(f"# HELP {name} Synthetic fleet metric {f}.")
        out.append(f"# TYPE {name} gauge")
        for s in range(1998):
            out.append(
                f'{name}{{cluster="c{s % 3}",namespace="ns-{s % 17}",pod="infer-{s // 8}",'
                f'rank="{s % 8}"}} {_fmt(rnd.random() * 1e6)}'
            )
    assert len(out) == 100_000
    return "\n".join(out) + "\n"


def ours_samples(body: str, cache: SeriesCache | None = None) -> set[Sample]:
    res = parse_exposition(body, default_ts_ms=0, cache=cache)
    return {(s.series.name, s.series.labels, _fmt(s.value)) for s in res.batch.samples()}


def client_samples(body: str) -> set[Sample]:
    typed_counters = {ln.split()[2] for ln in body.splitlines()
                      if ln.startswith("# TYPE ") and ln.endswith(" counter")}
    got: set[Sample] = set()
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            name = s.name
            if fam.type == "counter" and fam.name in typed_counters and name == fam.name + "_total":
                name = fam.name  # prometheus_client appends _total to 0.0.4 counter samples
            got.add((name, tuple(sorted(s.labels.items())), _fmt(s.value)))
    return got


def consume_client(body: str) -> int:
    return sum(len(fam.samples) for fam in text_string_to_metric_families(body))


def timed(fn: Callable[[str], object], bodies: list[str]) -> float:
    """Best time over the bodies; each body is a fresh scrape (new values) of the same target."""
    best = math.inf
    for body in bodies:
        t0 = time.perf_counter()
        fn(body)
        best = min(best, time.perf_counter() - t0)
    return best


@dataclass(frozen=True)
class Round:
    """Best seconds over the bodies of one timing round."""

    cold: float
    warm: float
    client: float
    skip: float


def time_round(first: str, bodies: list[str], keep: Callable[[str], bool]) -> Round:
    cold = timed(lambda b: parse_exposition(b, default_ts_ms=0, cache=SeriesCache()), bodies)
    cache = SeriesCache()
    parse_exposition(first, default_ts_ms=0, cache=cache)  # the previous scrape primes the cache
    warm = timed(lambda b: parse_exposition(b, default_ts_ms=0, cache=cache), bodies)
    client = timed(consume_client, bodies)
    kcache = SeriesCache()
    parse_exposition(first, default_ts_ms=0, cache=kcache, keep_family=keep)
    skip = timed(lambda b: parse_exposition(b, default_ts_ms=0, cache=kcache, keep_family=keep), bodies)
    return Round(cold, warm, client, skip)


def run(label: str, make: Callable[[int], str], scrapes: int, repeats: int) -> list[float]:
    """Speedups (prometheus_client time / ours with a warm cache), one per round."""
    first, *bodies = [make(seed) for seed in range(scrapes + 1)]
    n = len(parse_exposition(first, default_ts_ms=0).batch)
    cache = SeriesCache()
    parse_exposition(first, default_ts_ms=0, cache=cache)
    if ours_samples(first) != client_samples(first) or ours_samples(bodies[0], cache) != client_samples(bodies[0]):
        raise SystemExit(f"{label}: ours and prometheus_client disagree")

    fams = sorted(parse_exposition(first, default_ts_ms=0).families)
    keep = set(fams[::2]).__contains__
    kept = parse_exposition(first, default_ts_ms=0, cache=SeriesCache(), keep_family=keep)
    rounds = [time_round(first, bodies, keep) for _ in range(repeats)]

    def med(field: str) -> float:
        return statistics.median(float(getattr(r, field)) for r in rounds)

    cold, warm, client, skip = med("cold"), med("warm"), med("client"), med("skip")
    us = 1e6 / n
    print(f"{label}: {n} samples, {len(first.splitlines())} lines, {len(first) / 1e6:.2f} MB, "
          f"best of {len(bodies)} scrapes each, median of {repeats} rounds")
    print(f"  ours cold cache     {cold * us:8.3f} us/sample  ({cold * 1e3:8.2f} ms)  speedup {client / cold:6.1f}x")
    print(f"  ours warm cache     {warm * us:8.3f} us/sample  ({warm * 1e3:8.2f} ms)  speedup {client / warm:6.1f}x")
    print(f"  prometheus_client   {client * us:8.3f} us/sample  ({client * 1e3:8.2f} ms)")
    print(f"  ours keep_family    {skip * us:8.3f} us/sample  ({skip * 1e3:8.2f} ms)  warm cache, "
          f"{(len(fams) + 1) // 2}/{len(fams)} families kept: {len(kept.batch)} samples kept, "
          f"{kept.skipped_samples} skipped (per-sample figure over all input samples)")
    print("  (name, labels, value) samples identical to prometheus_client: yes")
    speedups = [r.client / r.warm for r in rounds]
    print(f"  speedup warm vs prometheus_client, round by round: {spread(speedups)}")
    return speedups


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__spec__.name, __doc__, "fewer scrapes per body (about 20 s)")
    add_repeats(parser)
    args = parser.parse_args(argv)
    scrapes = {"vllm": 3, "dcgm": 10, "100k_lines": 1} if args.quick else {"vllm": 8, "dcgm": 30, "100k_lines": 2}
    results = {
        "vllm": run("vllm", vllm_body, scrapes["vllm"], args.repeats),
        "dcgm": run("dcgm", dcgm_body, scrapes["dcgm"], args.repeats),
        "100k_lines": run("100k_lines", big_body, scrapes["100k_lines"], args.repeats),
    }
    print()
    for body, speedups in results.items():
        print(Target.median_of(f"parse_speedup_{body}", speedups, GOAL, True).line())


if __name__ == "__main__":
    main()
