"""A real Prometheus (Debian package) over samples backfilled as TSDB blocks: the samples are
written as OpenMetrics, imported with ``promtool tsdb create-blocks-from openmetrics`` and
served by ``prometheus --storage.tsdb.path=<blocks>`` on a free loopback port. The conformance
tests and the query and rules benchmarks compare infermeter with it on the same samples."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

from store.types import SeriesKey
from tests.service import free_port


class PrometheusMissing(RuntimeError):
    pass


def binaries() -> tuple[str, str]:
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not binary or not promtool:
        raise PrometheusMissing("prometheus / promtool not installed (Debian package prometheus)")
    return binary, promtool


def write_openmetrics(series: Iterable[tuple[SeriesKey, np.ndarray, np.ndarray]], path: Path) -> int:
    """(key, timestamps ms, values) per series as OpenMetrics, families untyped ("gauge" needs
    no suffix rules); the number of samples written."""
    by_name: dict[str, list[tuple[SeriesKey, np.ndarray, np.ndarray]]] = {}
    for key, ts, values in series:
        by_name.setdefault(key.name, []).append((key, ts, values))
    written = 0
    with path.open("w") as out:
        for name, members in by_name.items():
            out.write(f"# TYPE {name} gauge\n")
            for key, ts, values in members:
                text = key.canonical()
                out.write("".join(f"{text} {_number(v)} {t / 1000:.3f}\n" for t, v in zip(ts.tolist(), values.tolist())))
                written += len(ts)
        out.write("# EOF\n")
    return written


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else repr(float(value))


def backfill(openmetrics: Path, blocks: Path) -> None:
    _, promtool = binaries()
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(blocks)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"promtool could not import {openmetrics}: {done.stdout[-2000:]}{done.stderr[-2000:]}")


@contextmanager
def prometheus(blocks: Path, work: Path, config: str = "global:\n  evaluation_interval: 1m\n",
               ready_timeout_s: float = 300.0) -> Iterator[str]:
    """Prometheus serving ``blocks`` with ``config`` (written to ``work/prometheus.yml``); yields
    its base URL once ready and stops it afterwards."""
    binary, _ = binaries()
    (work / "prometheus.yml").write_text(config)
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={blocks}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            try:
                if httpx.get(f"{base}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Prometheus on {blocks} did not become ready (exit {proc.poll()})")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
