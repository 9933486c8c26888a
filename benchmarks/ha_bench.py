"""HA pair benchmark: repeated failovers of two real `infermeter up` processes on one PostgreSQL
and one VictoriaMetrics, under steady alert traffic, with a real webhook receiver on loopback.

Traffic: ``--groups`` firing alerts, each its own notification group, re-notified every
``--repeat`` s (about groups / repeat notifications a second, each a new notification id).
A failover: the leader is killed (kill -9; every ``--stop-every``-th one is instead paused
with SIGSTOP past its lease and resumed after the takeover), the time until the other process
reports itself leader on ``/ready`` is the takeover time; the old leader is restarted (or
resumed) and must settle as the follower before the next round. At the end the outbox must
drain: every notification enqueued is delivered (else lost) and none twice (webhook-id).

Targets (median of ``--repeats`` runs of ``--failovers`` failovers each, the range printed):
``ha_takeover_p99_s`` <= 2 x the evaluation interval, ``ha_notifications_lost`` = 0,
``ha_notifications_duplicated`` = 0.

Run from the repository root: ``.venv/bin/python -m benchmarks.ha_bench [--quick] [--failovers 20]``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.ha_bench")

import argparse
import os
import signal
import statistics
import threading
import time

import numpy as np

from benchmarks._common import (
    Target,
    add_repeats,
    bench_parser,
    pg_store_url,
    postgres_available,
    postgres_database,
    scratch_dir,
    section,
    skipped,
)
from benchmarks._victoriametrics import VM_BINARY, VictoriaMetrics
from tests.engines import wait_until
from tests.ha.pair_harness import (
    Deliveries,
    UpProcess,
    account,
    leader_of,
    outbox_ids,
    push_probe,
    quiet,
    receiver_app,
    start_pair,
    wait_drained,
)
from tests.service import run_app

NAMES = ("ha_takeover_p99_s", "ha_notifications_lost", "ha_notifications_duplicated")


def one_run(args: argparse.Namespace, run: int) -> tuple[list[float], int, int, int]:
    """Takeover seconds of each failover, and notifications enqueued, lost, duplicated."""
    from infermeter import db
    from store.engine import create_store_engine

    with scratch_dir("infermeter-ha-") as tmp, postgres_database("im_ha_bench") as database:
        url = pg_store_url(database)
        engine = create_store_engine(url)
        db.upgrade(engine)
        engine.dispose()
        vm = VictoriaMetrics(tmp / "vm")
        with vm:
            stop_feed = threading.Event()

            def feed() -> None:  # keep the probe series fresh within the engine's lookback
                while not stop_feed.is_set():
                    push_probe(vm.url, args.groups, int(time.time() * 1000))
                    stop_feed.wait(30)

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
            deliveries = Deliveries()
            with run_app(receiver_app(deliveries)) as hook:
                pair = start_pair(tmp, url, vm.url, f"{hook}/hook", interval_s=args.interval, lease_s=args.lease,
                                  repeat_s=args.repeat)
                try:
                    takeovers = failovers(args, pair, deliveries)
                    quiet(leader_of(pair))  # no new notifications: the outbox drains to its last row
                    try:
                        wait_drained(url, deliveries, 120)
                    except AssertionError as exc:  # counted below as lost (undelivered)
                        print(f"  {exc}")
                finally:
                    for p in pair:
                        p.stop()
                    stop_feed.set()
                rows = outbox_ids(url)  # read once both stopped: nothing is enqueued or sent after
    got = deliveries.ids()
    lost, duplicated, pending = account(rows, got)
    lost += pending
    p99 = _p99(takeovers)
    print(f"  run {run + 1}: {len(takeovers)} failovers, takeover p50 {statistics.median(takeovers):.2f} s, "
          f"p99 {p99:.2f} s, max {max(takeovers):.2f} s; {len(rows)} notifications enqueued, "
          f"{len(got)} distinct delivered, lost {lost} ({pending} of them undelivered at the end), "
          f"duplicated {duplicated}", flush=True)
    return takeovers, len(rows), lost, duplicated


def failovers(args: argparse.Namespace, pair: tuple[UpProcess, UpProcess], deliveries: Deliveries) -> list[float]:
    took: list[float] = []
    wait_until(lambda: len(deliveries.ids()) >= args.groups, 60, "the first notifications")
    for i in range(args.failovers):
        leader = leader_of(pair)
        follower = pair[1] if leader is pair[0] else pair[0]
        paused = args.stop_every and (i + 1) % args.stop_every == 0
        started = time.monotonic()
        if paused:
            leader.signal(signal.SIGSTOP)
        else:
            leader.kill()
        while follower.role() != "leader":
            if time.monotonic() - started > 60:
                raise SystemExit(f"failover {i + 1}: no takeover within 60 s")
            time.sleep(0.02)
        took.append(time.monotonic() - started)
        if paused:
            leader.signal(signal.SIGCONT)
        else:
            leader.start()
        wait_until(lambda old=leader: old.role() == "follower", 90, f"failover {i + 1}: the old leader to follow")
        before = len(deliveries.ids())
        wait_until(lambda n=before: len(deliveries.ids()) > n, 60, f"failover {i + 1}: notifications from the new leader")
    return took


def _p99(values: list[float]) -> float:
    return float(np.quantile(values, 0.99))


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("benchmarks.ha_bench", __doc__, "4 failovers, 1 run")
    parser.add_argument("--failovers", type=int, help="failovers per run (default 20, quick 4)")
    parser.add_argument("--interval", type=int, default=2, help="evaluation interval, s (default 2)")
    parser.add_argument("--lease", type=int, default=2, help="lease duration, s (default 2)")
    parser.add_argument("--groups", type=int, default=5, help="firing alerts, one notification group each (default 5)")
    parser.add_argument("--repeat", type=int, default=3, help="repeat interval of the notifications, s (default 3)")
    parser.add_argument("--stop-every", type=int, default=4, help="every Nth failover pauses the leader (SIGSTOP) "
                        "instead of killing it; 0: kill only (default 4)")
    add_repeats(parser)
    args = parser.parse_args(argv)
    args.failovers = args.failovers or (4 if args.quick else 20)
    if args.quick:
        args.repeats = 1
    print(f"HA benchmark: {os.cpu_count()} CPUs, {args.repeats} runs of {args.failovers} failovers, evaluation "
          f"interval {args.interval} s, lease {args.lease} s")
    if not postgres_available() or not os.access(VM_BINARY, os.X_OK):
        why = "PostgreSQL on 127.0.0.1:5432 and the Debian package victoria-metrics are needed"
        print("\n".join(skipped(n, g, False, why) for n, g in zip(NAMES, (2.0 * args.interval, 0, 0))))
        return 0
    section("failovers")
    runs = [one_run(args, r) for r in range(args.repeats)]
    section("targets")
    print(Target.median_of(NAMES[0], [_p99(t) for t, *_ in runs], 2.0 * args.interval, higher_is_better=False).line())
    print(Target.median_of(NAMES[1], [float(r[2]) for r in runs], 0, higher_is_better=False).line())
    print(Target.median_of(NAMES[2], [float(r[3]) for r in runs], 0, higher_is_better=False).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
