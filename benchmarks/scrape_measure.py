"""Process measurement for :mod:`benchmarks.scrape_bench`: running a scraper as a child process,
waiting until it serves, reading its CPU time and stored-sample counter over a window, and
finding (or installing) the Prometheus binary it is compared against.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import psutil

PROMETHEUS = "/usr/bin/prometheus"


# -- processes ----------------------------------------------------------------------------------
def start(
    cmd: list[str], log: IO[bytes], cwd: Path, stdout: int | IO[bytes] | None = None
) -> subprocess.Popen[bytes]:
    """A child in its own process group (so stopping it takes anything it spawned too)."""
    return subprocess.Popen(
        cmd, stdout=stdout if stdout is not None else log, stderr=log, cwd=cwd, start_new_session=True
    )


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGINT the process group, SIGKILL it if it does not exit in time."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def running(
    cmd: list[str], log_path: Path, cwd: Path, pipe_stdout: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    with open(log_path, "wb") as log:
        proc = start(cmd, log, cwd, subprocess.PIPE if pipe_stdout else None)
        try:
            yield proc
        finally:
            stop(proc)
            if proc.stdout is not None:
                proc.stdout.close()


def wait_http(
    client: httpx.Client, path: str, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 120.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before it was ready")
        try:
            if client.get(path).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not become ready within {timeout_s:.0f} s")


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def serving(
    cmd: list[str], log_path: Path, cwd: Path, port: int, ready_path: str, what: str
) -> Iterator[tuple[subprocess.Popen[bytes], httpx.Client, psutil.Process]]:
    """Run a scraper serving HTTP on loopback ``port`` until ``ready_path`` answers 200 (printing
    its log's tail if it never does), then yield it, a client for it and its psutil handle."""
    with (
        running(cmd, log_path, cwd) as proc,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as client,
    ):
        try:
            wait_http(client, ready_path, proc, what)
        except RuntimeError:
            print(tail(log_path))
            raise
        yield proc, client, psutil.Process(proc.pid)


# -- measurement ---------------------------------------------------------------------------------
def metric_value(client: httpx.Client, name: str) -> float:
    """``name`` from the /metrics page, summed over its label sets (NaN when absent)."""
    return page_value(client.get("/metrics").text, name)


def page_value(page: str, name: str) -> float:
    """``name`` from a /metrics page's text, summed over its label sets (NaN when absent)."""
    total, found = 0.0, False
    for line in page.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else float("nan")


def metric_by_label(page: str, name: str, label: str) -> dict[str, float]:
    """``name``'s values on a /metrics page's text by the value of ``label`` (summed where equal)."""
    out: dict[str, float] = {}
    for line in page.splitlines():
        if line.startswith(name + "{"):
            found = re.search(label + r'="((?:[^"\\]|\\.)*)"', line)
            key = found.group(1) if found else ""
            out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def cpu_s(ps: psutil.Process) -> float:
    times = ps.cpu_times()
    return float(times.user + times.system)


@dataclass(frozen=True)
class Point:
    wall: float
    cpu: float
    samples: float


def windows(
    ps: psutil.Process, read_samples: Callable[[], float], warmup_s: float, duration_s: float, count: int = 1,
    rss_samples: list[int] | None = None,
) -> list[Point]:
    """The ``count + 1`` edges of ``count`` back-to-back windows of ``duration_s`` each; the
    process's RSS every half second of the last window into ``rss_samples``."""
    # The warmup counts from the first stored sample (Prometheus starts scraping ~5 s after /-/ready).
    deadline = time.monotonic() + 60.0
    while not read_samples() > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(warmup_s)
    edges = [Point(time.monotonic(), cpu_s(ps), read_samples())]
    for i in range(count):
        end = time.monotonic() + duration_s
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))
            if rss_samples is not None and i == count - 1:
                rss_samples.append(ps.memory_info().rss)
        edges.append(Point(time.monotonic(), cpu_s(ps), read_samples()))
    return edges


# -- Prometheus ----------------------------------------------------------------------------------
def ensure_prometheus() -> str | None:
    """The binary's path, installing the Debian package if it is missing; None when unavailable."""
    if os.access(PROMETHEUS, os.X_OK):
        return PROMETHEUS
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return None
    print("prometheus missing: apt-get install -y prometheus ...", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", "prometheus"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=600,
    )
    # The package's service is not started in a container without systemd; stop it if it was.
    if shutil.which("service"):
        subprocess.run(
            ["service", "prometheus", "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    return PROMETHEUS if os.access(PROMETHEUS, os.X_OK) else None


def prom_query(client: httpx.Client, query: str) -> float:
    result = client.get("/api/v1/query", params={"query": query}).json()["data"]["result"]
    return float(result[0]["value"][1]) if result else float("nan")
