"""Three fake nodes as the collectors see them: NVML faked at the pynvml boundary and NCCL /
PyTorch / vLLM log files written as the real ones are (NCCL ``src/debug.cc`` and ``param.cc``,
PyTorch ``ProcessGroupNCCL.cpp`` glog lines)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alerts.thresholds import DEFAULT_WATCHED
from collector.nccl import NcclLogSource
from collector.nvml import NvmlGpuSource
from store.clock import ManualClock
from store.types import Sample, SeriesKey
from tests.collector.fake_pynvml import FakeNvml

TORCH_ENV = (
    "I20261201 10:00:0{n}.495654 1385591{n} ProcessGroupNCCL.cpp:914] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] "
    "ProcessGroupNCCL environments: NCCL version: 2.21.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 1, "
    "TORCH_NCCL_DUMP_ON_TIMEOUT: 0, TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC: 60000, TORCH_NCCL_DESYNC_DEBUG: 0, "
    "TORCH_NCCL_ENABLE_TIMING: 0, TORCH_NCCL_BLOCKING_WAIT: {blocking}, TORCH_DISTRIBUTED_DEBUG: OFF, "
    "TORCH_NCCL_ENABLE_MONITORING: 1, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: 480, TORCH_NCCL_TRACE_BUFFER_SIZE: 0\n"
)


def nccl_log(host: str, rank: int, *, blocking_wait: str = "1", topo_file: bool = True) -> str:
    pid = 4100 + rank
    p = f"{host}:{pid}:{pid}"
    lines = [
        "WARNING: Logging before InitGoogleLogging() is written to STDERR\n",
        TORCH_ENV.format(n=rank, rank=rank, blocking=blocking_wait),
        f"{p} [0] NCCL INFO Bootstrap: Using eth0:10.0.0.{rank + 1}<0>\n",
        f"{p} [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n",
        f"{p} [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n",
        f"{p} [0] NCCL INFO cudaDriverVersion 12040\n",
        f"{p} [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n",
    ]
    if topo_file:
        lines.append(f"{p} [0] NCCL INFO NCCL_TOPO_FILE set by environment to /etc/nccl/topo.xml\n")
    lines += [
        f"{p} [0] NCCL INFO ncclCommInitRank comm 0x55b99fe024c0 rank {rank} nranks 3 cudaDev 0 nvmlDev 0 busId 18000 "
        "commId 0x5ae77eb5ea4ec1ee - Init START\n",
        f"INFO 12-01 10:00:1{rank} [eplb_state.py:301] EPLB step: 40 for model deepseek-v3: avg_tokens=812.50, "
        "max_tokens=1204, balancedness=0.6748, steps until the next rearrangement: 2960\n",
    ]
    return "".join(lines)


async def _collect_nvml(host: str, nvml: FakeNvml) -> list[Sample]:
    source = NvmlGpuSource(ManualClock(1_000), host, nvml=nvml)
    result = await source.collect(asyncio.get_running_loop().time() + 5)
    await source.close()
    assert result.health.up, result.health.error
    return result.batch.samples()


def collect_nodes(tmp: Path, *, odd_driver: str = "", unset_blocking_wait: str = "", no_topo_file: str = "") -> list[Sample]:
    """Samples of nodes a, b and c as the scrape loop labels them (job/instance), one collect each."""
    out: list[Sample] = []
    for rank, host in enumerate(("node-a", "node-b", "node-c")):
        nvml = FakeNvml(gpu_count=2)
        if host == odd_driver:
            nvml.driver_version = b"535.104.05"  # old bindings answer bytes
        for sample in asyncio.run(_collect_nvml(host, nvml)):
            out.append(_labelled(sample, "gpu", host))
        logs = tmp / host
        logs.mkdir(parents=True, exist_ok=True)
        (logs / "rank.log").write_text(nccl_log(host, rank, blocking_wait="0" if host == unset_blocking_wait else "1",
                                                topo_file=host != no_topo_file))
        source = NcclLogSource([str(logs / "*.log")], tmp / f"{host}-state.json", ManualClock(1_000), host=host,
                               watched=DEFAULT_WATCHED)  # as the composition root passes the pack's list
        result = source.collect_sync(1_000)
        assert result.health.up, result.health.error
        out += [_labelled(s, "nccl", host) for s in result.batch.samples()]
    return out


def _labelled(sample: Sample, job: str, instance: str) -> Sample:
    labels = {**sample.series.labels_dict(), "job": job, "instance": instance}
    return Sample(SeriesKey.of(sample.series.name, labels), sample.ts_ms, sample.value)
