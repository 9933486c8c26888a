"""Abuse benchmark: a real `infermeter up` (SQLite) under the requests a hostile client sends,
with `/health` polled every 20 ms throughout; the service must answer each at once and stay
responsive.

Per run, on a fresh process: (1) one push of a million series (Prometheus text, ~40 MB) with
the default limits; (2) pushes of 50,000 new series each until the store's active-series limit
(set to 200,000 here) refuses them; (3) listing every stored series; (4) twenty backtracking
regular-expression probes (`([a-z_]+)+!` and friends) through /api/v1/series and /api/v1/query.

Targets (median of ``--repeats`` runs, the range printed): ``health_p99_under_abuse_ms`` <= 250;
``million_series_push_rss_growth_mib`` <= 50 (refused at the door: nothing of it is kept);
``series_stored_beyond_limit`` = 0; ``regex_probe_slowest_s`` <= 1.

Run from the repository root: ``.venv/bin/python -m benchmarks.security_bench [--repeats 3]``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.security_bench")

import os
import subprocess
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

from benchmarks._common import MIB, Target, add_repeats, bench_parser, free_port, scratch_dir, section
from tests.service import wait_http

TOKEN = "bench-admin"
LIMIT = 200_000
CHUNK = 50_000
PROBES = ('{__name__=~"([a-z_]+)+!"}', '{__name__=~"(a|aa)+b"}', '{job=~"(x+x+)+y"}', '{__name__=~"(.*a){12}"}')


def _text(n: int, prefix: str, start: int = 0) -> bytes:
    return "".join(f'{prefix}{{i="{i}"}} 1\n' for i in range(start, start + n)).encode()


class HealthWatch:
    """``/health`` every 20 ms on its own connection; the answer times, in ms."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                client.get(f"{self.base}/health")
                self.times.append((time.perf_counter() - started) * 1000)
                self._stop.wait(0.02)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def _start(folder: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    config = folder / "infermeter.yaml"
    config.write_text(f"server:\n  port: {port}\nstore:\n  url: sqlite:///{folder / 'abuse.db'}\n  max_series: {LIMIT}\n"
                      "gpu:\n  nvml: 'off'\nworker:\n  embedded: false\nlogging:\n  level: WARNING\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("INFERMETER_")}, "INFERMETER_API_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "infermeter", "--config", str(config), "up"], cwd=folder, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/ready", 60, proc)
    except AssertionError:
        proc.kill()
        raise
    return proc, base


def one_run(folder: Path) -> dict[str, float]:
    proc, base = _start(folder)
    auth = {"authorization": f"Bearer {TOKEN}", "content-type": "text/plain"}
    rss = psutil.Process(proc.pid)
    out: dict[str, float] = {}
    try:
        with HealthWatch(base) as watch, httpx.Client(timeout=600) as client:
            before = rss.memory_info().rss
            body = _text(1_000_000, "abuse_metric")
            started = time.perf_counter()
            million = client.post(f"{base}/api/v1/samples", content=body, headers=auth)
            out["million_push_s"] = time.perf_counter() - started
            out["million_push_status"] = million.status_code
            out["million_rss_growth_mib"] = (rss.memory_info().rss - before) / MIB
            stored, pushes = 0, 0
            while pushes < 8:
                answer = client.post(f"{base}/api/v1/samples", content=_text(CHUNK, "fleet_metric", pushes * CHUNK),
                                     headers=auth)
                pushes += 1
                stored += int(answer.json().get("data", {}).get("accepted", 0))
                if answer.status_code != 200:
                    out["limit_status"] = answer.status_code
                    break
            listed = client.get(f"{base}/api/v1/series", params={"match[]": '{__name__=~".+"}'}, headers=auth)
            out["listed_series"] = len(listed.json()["data"])
            out["rss_at_limit_mib"] = rss.memory_info().rss / MIB
            slowest = 0.0
            for probe in PROBES * 5:
                started = time.perf_counter()
                client.get(f"{base}/api/v1/series", params={"match[]": probe}, headers=auth)
                client.get(f"{base}/api/v1/query", params={"query": f"count({probe})"}, headers=auth)
                slowest = max(slowest, (time.perf_counter() - started) / 2)
            out["regex_probe_slowest_s"] = slowest
        out["health_p99_ms"] = float(np.percentile(watch.times, 99))
        out["health_max_ms"] = max(watch.times)
        out["health_polls"] = len(watch.times)
        out["stored"] = stored
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def main() -> None:
    parser = bench_parser("benchmarks.security_bench", __doc__, "(no smaller size: the figures are about limits)")
    add_repeats(parser)
    args = parser.parse_args()
    runs = []
    for i in range(args.repeats):
        section(f"run {i + 1} of {args.repeats}")
        with scratch_dir("infermeter-abuse-") as folder:
            found = one_run(folder)
        for key, value in found.items():
            print(f"  {key:<26} {value:,.1f}")
        runs.append(found)
    section("targets")
    print(Target.median_of("health_p99_under_abuse_ms", [r["health_p99_ms"] for r in runs], 250, False).line())
    print(Target.median_of("million_series_push_rss_growth_mib", [r["million_rss_growth_mib"] for r in runs], 50,
                           False).line())
    print(Target.median_of("series_stored_beyond_limit", [max(0.0, r["listed_series"] - LIMIT) for r in runs], 0,
                           False).line())
    print(Target.median_of("regex_probe_slowest_s", [r["regex_probe_slowest_s"] for r in runs], 1, False).line())


if __name__ == "__main__":
    main()
