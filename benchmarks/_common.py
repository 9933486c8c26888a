"""Shared helpers for the benchmarks: synthetic GPU-fleet data, timing, target lines and
PostgreSQL scratch databases (VictoriaMetrics, the other peer, is in :mod:`benchmarks._victoriametrics`).

Nothing here imports the project beyond :mod:`store` value types, so a benchmark can use it
without pulling in the service.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shutil
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from store import SeriesKey

T = TypeVar("T")
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

SCRAPE_MS = 15_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
MIB = 1024 * 1024

UTIL = "DCGM_FI_DEV_GPU_UTIL"
POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
GPUS_PER_HOST = 8
MODEL_NAME = "NVIDIA H100 80GB HBM3"


# -- synthetic data ----------------------------------------------------------------------------
def gpu_labels(gpu_index: int) -> dict[str, str]:
    """dcgm-exporter's labels for the ``gpu_index``-th GPU of the fleet (8 GPUs a host)."""
    host, gpu = divmod(gpu_index, GPUS_PER_HOST)
    return {
        "gpu": str(gpu),
        "UUID": f"GPU-{uuid.UUID(int=(0x5EED << 96) | gpu_index)}",
        "Hostname": f"gpu-node-{host:03d}",
        "modelName": MODEL_NAME,
        "device": f"nvidia{gpu}",
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
    }


def util_walk(rng: np.random.Generator, n_series: int, n_points: int) -> F64:
    """Integer percent utilisation: a random walk clipped to 0..100, one row per series."""
    steps = rng.integers(-6, 7, size=(n_series, n_points))
    out = np.empty((n_series, n_points), np.float64)
    level = rng.integers(0, 101, size=n_series).astype(np.int64)
    for j in range(n_points):  # clipping makes the walk sequential; n_points is small enough
        level = np.clip(level + steps[:, j], 0, 100)
        out[:, j] = level
    return out


def power_walk(rng: np.random.Generator, n_series: int, n_points: int) -> F64:
    """Board power in W with milliwatt resolution: ``round(300 + walk, 3)``, kept in 60..700."""
    walk = np.cumsum(rng.normal(0.0, 4.0, size=(n_series, n_points)), axis=1)
    return np.asarray(np.round(np.clip(300.0 + walk, 60.0, 700.0), 3), dtype=np.float64)


def energy_counter(rng: np.random.Generator, n_series: int, n_points: int) -> F64:
    """Total energy in mJ since driver load: integers, growing by ~power x 15 s each scrape."""
    watts = np.clip(300.0 + np.cumsum(rng.normal(0.0, 4.0, size=(n_series, n_points)), axis=1), 60.0, 700.0)
    start = rng.integers(10**10, 10**12, size=(n_series, 1)).astype(np.float64)
    return start + np.cumsum(np.round(watts * (SCRAPE_MS / 1000) * 1000), axis=1)


@dataclass(frozen=True)
class Fleet:
    """``values[i, j]`` is series ``keys[i]`` at ``ts_ms[j]``."""

    keys: list[SeriesKey]
    ts_ms: I64
    values: F64

    @property
    def n_series(self) -> int:
        return len(self.keys)

    @property
    def n_points(self) -> int:
        return len(self.ts_ms)

    @property
    def samples(self) -> int:
        return self.n_series * self.n_points

    def sids_ts_values(self, ids: I64) -> tuple[I64, I64, F64]:
        """The samples as flat (series id, ts, value) columns, time-major as scraped."""
        n, m = self.values.shape
        sid = np.tile(ids.astype(np.int64), m)
        ts = np.repeat(self.ts_ms, n)
        return sid, ts, np.ascontiguousarray(self.values.T).reshape(-1)


def mixed_fleet(n_series: int, n_points: int, start_ms: int, seed: int = 1) -> Fleet:
    """A third utilisation, a third power, a third energy counters; each GPU has all three."""
    rng = np.random.default_rng(seed)
    per_kind = [n_series // 3, n_series // 3, n_series - 2 * (n_series // 3)]
    blocks = [
        util_walk(rng, per_kind[0], n_points),
        power_walk(rng, per_kind[1], n_points),
        energy_counter(rng, per_kind[2], n_points),
    ]
    keys = [
        SeriesKey.of(name, gpu_labels(i))
        for name, count in zip((UTIL, POWER, ENERGY), per_kind)
        for i in range(count)
    ]
    ts = start_ms + np.arange(n_points, dtype=np.int64) * SCRAPE_MS
    return Fleet(keys, ts, np.vstack(blocks))


def util_fleet(n_series: int, n_points: int, start_ms: int, seed: int = 2) -> Fleet:
    """GPU utilisation only (the dashboard query's data)."""
    rng = np.random.default_rng(seed)
    keys = [SeriesKey.of(UTIL, gpu_labels(i)) for i in range(n_series)]
    ts = start_ms + np.arange(n_points, dtype=np.int64) * SCRAPE_MS
    return Fleet(keys, ts, util_walk(rng, n_series, n_points))


def recent_hour(hours_back: float = 0.0) -> int:
    """An hour-aligned ms timestamp ``hours_back`` hours before now (VictoriaMetrics refuses
    data far from the present, so synthetic data is placed just behind the wall clock)."""
    now = time.time_ns() // 1_000_000
    return (now - int(hours_back * HOUR_MS)) // HOUR_MS * HOUR_MS


# -- timing and reporting -----------------------------------------------------------------------
def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def run_times(fn: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn``."""
    return [timed(fn)[0] for _ in range(repeats)]


def median_time(fn: Callable[[], object], repeats: int) -> float:
    return statistics.median(run_times(fn, repeats))


def fmt_figure(value: float) -> str:
    """A measured figure with as many decimals as its size deserves (0.72, 11.3, 779)."""
    if not math.isfinite(value):
        return str(value)
    size = abs(value)
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 0.1 or size == 0:
        return f"{value:.2f}"
    return f"{value:.2g}"


def spread(runs: Sequence[float]) -> str:
    """``median 0.72 (0.69..0.75 over 3 runs)`` for a figure measured several times."""
    if len(runs) == 1:
        return f"{fmt_figure(runs[0])} (1 run)"
    return (
        f"median {fmt_figure(statistics.median(runs))} "
        f"({fmt_figure(min(runs))}..{fmt_figure(max(runs))} over {len(runs)} runs)"
    )


# Every benchmark ends with one such line per target; ``make bench`` collects them.
TARGET_LINE = re.compile(
    r"^target (?P<name>[^:\n]+): (?P<measured>.+?) \(goal (?P<goal>[^)\n]+)\) "
    r"(?P<verdict>PASS|SHORT|SKIP)(?: \((?P<why>[^\n]*)\))?$"
)


def goal_text(goal: float, higher_is_better: bool) -> str:
    return f"{'>=' if higher_is_better else '<='} {goal:g}"


@dataclass(frozen=True)
class Target:
    """A target and what was measured for it: ``measured`` is the median of ``runs`` runs
    (``low``..``high`` their range); the target is met when the median meets the goal.

    Build it with :meth:`median_of` from every run's figure; a figure that is the same on
    every run (bytes on disk, a model's accuracy on fixed data) is one run."""

    name: str
    measured: float
    goal: float
    higher_is_better: bool
    low: float | None = None
    high: float | None = None
    runs: int = 1

    @classmethod
    def median_of(cls, name: str, runs: Sequence[float], goal: float, higher_is_better: bool) -> Target:
        if not runs:
            raise ValueError(f"target {name}: no runs")
        return cls(name, statistics.median(runs), goal, higher_is_better, min(runs), max(runs), len(runs))

    @property
    def met(self) -> bool:
        if self.higher_is_better:
            return self.measured >= self.goal
        return self.measured <= self.goal

    def line(self) -> str:
        """``target <name>: <median> [<low>..<high>, median of <n>] (goal <op> <goal>) PASS|SHORT``."""
        if ":" in self.name or "\n" in self.name:
            raise ValueError(f"a target name holds no colon or newline: {self.name!r}")
        measured = fmt_figure(self.measured)
        if self.runs > 1 and self.low is not None and self.high is not None:
            measured += f" [{fmt_figure(self.low)}..{fmt_figure(self.high)}, median of {self.runs}]"
        verdict = "PASS" if self.met else "SHORT"
        return f"target {self.name}: {measured} (goal {goal_text(self.goal, self.higher_is_better)}) {verdict}"


def skipped(name: str, goal: float, higher_is_better: bool, why: str) -> str:
    """The line of a target that could not be measured (its peer is not installed, ...)."""
    return f"target {name}: n/a (goal {goal_text(goal, higher_is_better)}) SKIP ({why})"


def bench_parser(module: str, doc: str | None, quick_help: str, whole_doc: bool = False) -> argparse.ArgumentParser:
    """The argument parser every benchmark starts from: ``prog`` is its ``-m`` command, the
    description its docstring (the first paragraph unless ``whole_doc``), and ``--quick``."""
    description = doc if whole_doc or not doc else doc.split("\n\n")[0]
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help=quick_help)
    return parser


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def add_repeats(parser: argparse.ArgumentParser, default: int = 3, what: str = "headline figure") -> None:
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=default,
        metavar="N",
        help=f"runs per {what}; the median decides the target, the range is printed (default {default})",
    )


def rate(samples: int, seconds: float) -> str:
    return f"{samples / seconds / 1e6:6.3f} M samples/s" if seconds > 0 else "inf"


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 78 - len(title)), flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def dir_bytes(path: Path, exclude: Sequence[str] = ()) -> int:
    """Bytes of the regular files under ``path`` (apparent size), skipping top-level ``exclude``."""
    total = 0
    for entry in path.iterdir():
        if entry.name in exclude:
            continue
        if entry.is_dir() and not entry.is_symlink():
            total += sum(f.stat().st_size for f in entry.rglob("*") if f.is_file() and not f.is_symlink())
        elif entry.is_file():
            total += entry.stat().st_size
    return total


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# -- PostgreSQL ---------------------------------------------------------------------------------
def pg_dsn(database: str) -> str:
    return f"host=127.0.0.1 port=5432 user=postgres dbname={database}"


PG_ADMIN_DSN = pg_dsn("postgres")


def postgres_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, connect_timeout=3):
            return True
    except Exception:
        return False


@contextlib.contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A throwaway database; yields its name and drops it on exit."""
    import psycopg

    name = f"{prefix}_{os.getpid()}_{int(time.time())}"
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_store_url(database: str) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}"
