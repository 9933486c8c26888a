"""Section 4 of :mod:`benchmarks.store_bench`: RSS and HTTP ingest rate of ``infermeter up``
fed Prometheus text bodies."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import psutil

from benchmarks._common import HOUR_MS, MIB, SCRAPE_MS, free_port, gpu_labels, rate, section
from benchmarks.store_common import Sizes

REPO = Path(__file__).resolve().parent.parent


DCGM_FIELDS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
)


def exposition_bodies(n_series: int, n_bodies: int, start_ms: int, seed: int = 3) -> Iterator[bytes]:
    """Prometheus text bodies of ``n_series`` dcgm-shaped series, one timestamp per body."""
    prefixes: list[str] = []
    for gpu in range(-(-n_series // len(DCGM_FIELDS))):
        labels = ",".join(f'{k}="{v}"' for k, v in gpu_labels(gpu).items())
        prefixes.extend(f"{field}{{{labels}}}" for field in DCGM_FIELDS)
    prefixes = prefixes[:n_series]
    rng = np.random.default_rng(seed)
    level = rng.integers(0, 1000, n_series)
    for b in range(n_bodies):
        level = np.abs(level + rng.integers(-5, 6, n_series))
        ts = start_ms + b * SCRAPE_MS
        yield ("\n".join([f"{p} {v} {ts}" for p, v in zip(prefixes, level.tolist())]) + "\n").encode()


class RssSampler(threading.Thread):
    """Polls a process's RSS and keeps the peak."""

    def __init__(self, proc: psutil.Process, interval_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.interval_s = interval_s
        self.peak = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def scrape_values(client: httpx.Client, names: Sequence[str]) -> dict[str, float]:
    """Unlabelled values of ``names`` from the service's /metrics (NaN when absent)."""
    found = dict.fromkeys(names, float("nan"))
    for line in client.get("/metrics").text.splitlines():
        name, _, value = line.partition(" ")
        if name in found:
            found[name] = float(value)
    return found


def wait_ready(client: httpx.Client, proc: subprocess.Popen[bytes], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"infermeter up exited with {proc.returncode}")
        try:
            if client.get("/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("infermeter up did not become ready")


@dataclass(frozen=True)
class ServiceRun:
    ready_s: float
    idle_rss: int
    after_rss: int
    peak_rss: int
    vm_hwm: int
    accepted: int
    in_requests_s: float
    wall_s: float
    checkpoints: float
    head_samples: float
    stop_s: float
    exit_code: int | None


def drive_service(proc: subprocess.Popen[bytes], port: int, sizes: Sizes) -> ServiceRun:
    """Wait for /ready, push every body, read RSS and the store's own metrics, stop with SIGINT."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120.0) as client:
        started = time.perf_counter()
        wait_ready(client, proc)
        ready_s = time.perf_counter() - started
        ps = psutil.Process(proc.pid)
        time.sleep(1.0)
        idle = ps.memory_info().rss
        sampler = RssSampler(ps)
        sampler.start()
        start_ms = (time.time_ns() // 1_000_000) // SCRAPE_MS * SCRAPE_MS
        accepted = 0
        in_requests = 0.0
        wall = time.perf_counter()
        for body in exposition_bodies(sizes.rss_series, sizes.rss_bodies, start_ms):
            t0 = time.perf_counter()
            response = client.post(
                "/api/v1/samples", content=body, headers={"Content-Type": "text/plain; version=0.0.4"}
            )
            in_requests += time.perf_counter() - t0
            response.raise_for_status()
            accepted += response.json()["data"]["accepted"]
        wall = time.perf_counter() - wall
        after = ps.memory_info().rss
        sampler.stop()
        hwm = vm_hwm(proc.pid)
        stats = scrape_values(client, ("infermeter_store_checkpoints_total", "infermeter_store_head_samples"))
    stop_started = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.wait(120)
    return ServiceRun(
        ready_s=ready_s,
        idle_rss=idle,
        after_rss=after,
        peak_rss=max(sampler.peak, after),
        vm_hwm=hwm,
        accepted=accepted,
        in_requests_s=in_requests,
        wall_s=wall,
        checkpoints=stats["infermeter_store_checkpoints_total"],
        head_samples=stats["infermeter_store_head_samples"],
        stop_s=time.perf_counter() - stop_started,
        exit_code=proc.returncode,
    )


def bench_rss(sizes: Sizes, tmp: Path) -> None:
    section("4. RSS of `infermeter up`")
    config = tmp / "infermeter.yaml"
    # the reference worker (its own process) would only add noise to the service's memory
    config.write_text(f'store:\n  url: "sqlite:///{tmp / "up.sqlite"}"\nlogging:\n  level: WARNING\nworker:\n  embedded: false\n')
    port = free_port()
    total = sizes.rss_series * sizes.rss_bodies
    with open(tmp / "up.log", "wb") as log:
        proc = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "infermeter"), "--config", str(config), "up", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        try:
            run = drive_service(proc, port, sizes)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if run.accepted != total:
        print(f"WARNING: the service accepted {run.accepted:,} of {total:,} samples")
    print(
        f"{sizes.rss_bodies:,} bodies x {sizes.rss_series:,} series = {total:,} samples, Prometheus text with ms "
        f"timestamps 15 s apart from the wall clock on ({sizes.rss_bodies * SCRAPE_MS / HOUR_MS:.1f} h of data time)"
    )
    print(f"  ready after                          {run.ready_s:8.1f} s")
    print(f"  RSS idle after startup               {run.idle_rss / MIB:8.1f} MiB")
    print(f"  RSS after the last push              {run.after_rss / MIB:8.1f} MiB")
    print(f"  peak RSS (psutil, polled 50 ms)      {run.peak_rss / MIB:8.1f} MiB")
    print(f"  VmHWM (/proc/<pid>/status)           {run.vm_hwm / MIB:8.1f} MiB")
    print(
        f"  HTTP ingest, time inside requests    {run.in_requests_s:8.1f} s  {rate(total, run.in_requests_s)}"
    )
    print(f"  HTTP ingest, wall incl. client work  {run.wall_s:8.1f} s  {rate(total, run.wall_s)}")
    print(
        f"  store after the push                 {run.checkpoints:8.0f} checkpoints that flushed samples, "
        f"{run.head_samples:,.0f} samples in the head"
    )
    print(f"  shutdown (SIGINT, final checkpoint)  {run.stop_s:8.1f} s, exit code {run.exit_code}")
