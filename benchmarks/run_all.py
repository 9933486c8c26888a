"""Run every benchmark in turn, each as its own process, and collect their target lines.

Run from the repository root: ``.venv/bin/python -m benchmarks.run_all [--quick] [--repeats N]
[--only parse_bench,store_bench]`` -- or ``make bench`` (full sizes: the better part of an hour on
2 cores) and ``make bench QUICK=1`` (``--quick``: a few minutes).

Each benchmark's output is passed through as it comes. A benchmark that exits non-zero (or
prints no target line) does not stop the others; at the end every ``target ...`` line of every
benchmark is printed again, with a line per benchmark saying how it ended and how long it took.
The exit status is 1 when a benchmark crashed: a SHORT or SKIP target is a result, not a crash.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: the benchmarks package is not importable that way
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.run_all")

import argparse
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._common import TARGET_LINE, positive_int, section

REPO = Path(__file__).resolve().parent.parent
# Cheap ones first; each needs only what it says when it starts (and prints SKIP without it).
BENCHMARKS = (
    "parse_bench",
    "store_bench",
    "forecast_bench",
    "rules_bench",
    "scrape_bench",
    "worker_bench",
    "dashboard_bench",
    "security_bench",
    "query_bench",
    "fleet_bench",
    "ha_bench",
)


@dataclass
class Outcome:
    name: str
    returncode: int = 0
    seconds: float = 0.0
    targets: list[str] = field(default_factory=list)

    @property
    def crashed(self) -> bool:
        return self.returncode != 0 or not self.targets

    def status(self) -> str:
        if self.returncode != 0:
            return f"CRASHED (exit status {self.returncode})"
        if not self.targets:
            return "CRASHED (no target line)"
        verdicts = [TARGET_LINE.match(line).group("verdict") for line in self.targets]  # type: ignore[union-attr]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("PASS", "SHORT", "SKIP") if v in verdicts)
        return f"ok ({counts})"


def run_one(name: str, extra: Sequence[str]) -> Outcome:
    """Run ``python -m benchmarks.<name>`` from the repository root, passing its output through."""
    cmd = [sys.executable, "-m", f"benchmarks.{name}", *extra]
    section(f"benchmarks.{name}: {' '.join(cmd[1:])}")
    outcome = Outcome(name)
    started = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if TARGET_LINE.match(line.rstrip("\n")):
                outcome.targets.append(line.rstrip("\n"))
        outcome.returncode = proc.wait()
    outcome.seconds = time.perf_counter() - started
    return outcome


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def summary(outcomes: Sequence[Outcome], quick: bool, seconds: float) -> None:
    section(f"summary: {len(outcomes)} benchmarks, {'quick' if quick else 'full'} sizes, {minutes(seconds)}")
    for o in outcomes:
        print(f"  {o.name:<16} {minutes(o.seconds):>7}  {o.status()}")
    print()
    for o in outcomes:
        for line in o.targets:
            print(line)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run_all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument("--repeats", type=positive_int, metavar="N", help="pass --repeats N to every benchmark")
    parser.add_argument(
        "--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {', '.join(BENCHMARKS)}"
    )
    args = parser.parse_args(argv)
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(args.only) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    extra = (["--quick"] if args.quick else []) + ([f"--repeats={args.repeats}"] if args.repeats else [])
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    try:
        for name in args.only:
            outcomes.append(run_one(name, extra))
    except KeyboardInterrupt:
        print("\ninterrupted: the benchmarks run so far", flush=True)
        summary(outcomes, args.quick, time.perf_counter() - started)
        return 130
    summary(outcomes, args.quick, time.perf_counter() - started)
    return 1 if any(o.crashed for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
