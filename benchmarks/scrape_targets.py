"""Loopback scrape targets for :mod:`benchmarks.scrape_bench`: one process, one port a target.

Half the targets look like dcgm-exporter (GPUs x ~40 ``DCGM_FI_*`` fields), half like vLLM
(``vllm:*`` gauges, counters and histograms with ``model_name`` labels); each serves about
``--series`` series. Bodies are rendered up front (``--bodies`` per target) and served in rotation,
so every scrape sees new values while serving costs little more than a socket write. Counters
and histograms grow from one body to the next and reset when the rotation wraps.

Prints one JSON line on stdout, ``{"dcgm": [ports...], "vllm": [ports...]}``, once every port listens.
Run from the repository root: ``.venv/bin/python -m benchmarks.scrape_targets --targets 100 --series 1000``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file: benchmarks are run as modules, one way for all
    sys.exit("run benchmarks as modules, from the repository root: .venv/bin/python -m benchmarks.scrape_targets")

import argparse
import asyncio
import json
import random
import signal
from collections.abc import Awaitable, Callable

DCGM_FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"),
    ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge"),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge"),
    ("DCGM_FI_DEV_PSTATE", "gauge"),
    ("DCGM_FI_DEV_FAN_SPEED", "gauge"),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter"),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter"),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter"),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter"),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter"),
    ("DCGM_FI_DEV_RETIRED_PENDING", "counter"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge"),
)
GPUS_PER_HOST = 8

VLLM_GAUGES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_swapped",
    "vllm:gpu_cache_usage_perc",
    "vllm:cpu_cache_usage_perc",
    "vllm:gpu_prefix_cache_hit_rate",
)
VLLM_COUNTERS = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
)
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
VLLM_HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", LATENCY_BUCKETS),
    ("vllm:time_per_output_token_seconds", LATENCY_BUCKETS),
    ("vllm:e2e_request_latency_seconds", LATENCY_BUCKETS),
    ("vllm:request_queue_time_seconds", LATENCY_BUCKETS),
    ("vllm:request_prompt_tokens", TOKEN_BUCKETS),
    ("vllm:request_generation_tokens", TOKEN_BUCKETS),
)


def dcgm_lines(target: int, n_series: int) -> list[tuple[str, str, str]]:
    """(metric name, type, series text without value) for a dcgm-shaped target."""
    out: list[tuple[str, str, str]] = []
    gpu = 0
    while len(out) < n_series:
        host, idx = divmod(gpu, GPUS_PER_HOST)
        labels = (
            f'gpu="{idx}",UUID="GPU-{target:04x}{gpu:04x}-5eed-4c1e-9a7b-0000{target:04x}{gpu:04x}",'
            f'device="nvidia{idx}",modelName="NVIDIA H100 80GB HBM3",'
            f'Hostname="gpu-node-{target:03d}-{host:02d}",DCGM_FI_DRIVER_VERSION="550.54.15"'
        )
        for name, kind in DCGM_FIELDS:
            out.append((name, kind, f"{name}{{{labels}}}"))
        gpu += 1
    return out[:n_series]


def vllm_lines(target: int, n_series: int) -> list[tuple[str, str, str]]:
    """(family name, type, series text without value) for a vLLM-shaped target (histogram series
    carry their family's name; sort by family keeps each family's lines together)."""
    out: list[tuple[str, str, str]] = []
    model = 0
    while len(out) < n_series:
        labels = f'model_name="org-{target:03d}/model-{model:02d}-8b-instruct"'
        for name in VLLM_GAUGES:
            out.append((name, "gauge", f"{name}{{{labels}}}"))
        for name in VLLM_COUNTERS:
            if name == "vllm:request_success_total":
                for reason in ("stop", "length", "abort"):
                    out.append((name, "counter", f'{name}{{{labels},finished_reason="{reason}"}}'))
            else:
                out.append((name, "counter", f"{name}{{{labels}}}"))
        for name, buckets in VLLM_HISTOGRAMS:
            for le in (*buckets, "+Inf"):
                out.append((name, "histogram", f'{name}_bucket{{{labels},le="{le}"}}'))
            out.append((name, "histogram", f"{name}_sum{{{labels}}}"))
            out.append((name, "histogram", f"{name}_count{{{labels}}}"))
        model += 1
    return out[:n_series]


_ERROR_FIELDS = ("ECC", "XID", "RETIRED", "REMAPPED", "ROW_REMAP", "REPLAY", "NVLINK_CRC", "NVLINK_RECOVERY")


def _is_error_field(name: str) -> bool:
    """Error counters and codes of a healthy fleet stay at 0 (random ones would set off
    thousands of XID/ECC alerts, measuring the alert storm instead of the scrape path)."""
    return any(part in name for part in _ERROR_FIELDS)


def _gauge(name: str, rng: random.Random) -> float:
    """A plausible value per kind of gauge, still different on every scrape."""
    if name.endswith("_TEMP"):
        return round(rng.uniform(30, 80), 3)
    if name.endswith("_perc"):
        return round(rng.uniform(0, 1), 4)
    return round(rng.uniform(0, 100), 3)


def render_bodies(lines: list[tuple[str, str, str]], n_bodies: int, rng: random.Random) -> list[bytes]:
    """``n_bodies`` exposition bodies over the same series: gauges random within plausible
    ranges, counters and histogram series growing from body to body (buckets stay cumulative:
    each grows by its rank); error counters and codes stay 0."""
    families: dict[str, list[int]] = {}
    for i, (name, _, _) in enumerate(lines):
        families.setdefault(name, []).append(i)
    values = [0.0 if _is_error_field(name) else rng.uniform(0, 1000) for name, _, _ in lines]
    for idxs in families.values():
        if lines[idxs[0]][1] == "histogram":
            for rank, i in enumerate(idxs):
                values[i] = float(rank * 10)
    bodies = []
    for _ in range(n_bodies):
        parts: list[str] = []
        for name, idxs in families.items():
            kind = lines[idxs[0]][1]
            parts.append(f"# HELP {name} Synthetic {kind}.\n# TYPE {name} {kind}\n")
            for rank, i in enumerate(idxs):
                if _is_error_field(name):
                    pass
                elif kind == "gauge":
                    values[i] = _gauge(name, rng)
                elif kind == "counter":
                    values[i] = round(values[i] + rng.uniform(0, 50), 3)
                else:
                    values[i] = float(int(values[i]) + 4 * rank + rng.randint(0, 3))
                parts.append(f"{lines[i][2]} {values[i]!r}\n")
        bodies.append("".join(parts).encode())
    return bodies


def handler(
    bodies: list[bytes], phase: int
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    heads = [
        (
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            f"Content-Length: {len(b)}\r\n\r\n"
        ).encode()
        for b in bodies
    ]
    counter = [phase]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one GET per header block
                try:
                    await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                k = counter[0] % len(bodies)
                counter[0] += 1
                writer.write(heads[k])
                writer.write(bodies[k])
                await writer.drain()
        finally:
            writer.close()

    return serve


async def main_async(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    ports: dict[str, list[int]] = {"dcgm": [], "vllm": []}
    servers = []
    for t in range(args.targets):
        kind = "dcgm" if t % 2 == 0 else "vllm"
        lines = dcgm_lines(t, args.series) if kind == "dcgm" else vllm_lines(t, args.series)
        bodies = render_bodies(lines, args.bodies, rng)
        server = await asyncio.start_server(handler(bodies, t), "127.0.0.1", 0)
        servers.append(server)
        ports[kind].append(server.sockets[0].getsockname()[1])
    print(json.dumps(ports), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scrape_targets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--series", type=int, default=1000, help="series per target")
    parser.add_argument("--bodies", type=int, default=4, help="bodies served in rotation per target")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
