"""Match local inference engines to the GPUs they run on, through NVML's running processes.

NVML lists the compute processes on each GPU (``nvmlDeviceGetComputeRunningProcesses``). An
engine target is known by its port; the process listening on that port is its API server, and
the processes on the GPUs are that server or its descendants (vLLM, SGLang and TGI start one
worker process per GPU or per tensor-parallel rank). A GPU belongs to a target when one of its
processes is in the target's process tree.

Limits, by construction: NVML reports host PIDs, so an agent in a container needs the host's
PID namespace (``hostPID: true``) to match anything; and reading which process listens on a
port needs permission to see other users' sockets (root, or the same user as the engine). When
nothing matches, nothing is written and the ledger falls back to the node's GPUs as a whole.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from collector.target_gpus import target_gpu_key
from store.types import Sample


@dataclass(frozen=True, slots=True)
class EngineTarget:
    job: str
    instance: str
    port: int


class ProcessTable(Protocol):
    def listener_trees(self, ports: Collection[int]) -> dict[int, frozenset[int]]:
        """Per port, the pid listening on it on this host and all its descendants (empty if none)."""
        ...


class PsutilProcessTable:
    """The real process table, read with psutil (blocking: run it off the event loop). One scan
    of the socket table serves every port: it walks every process's file descriptors."""

    def listener_trees(self, ports: Collection[int]) -> dict[int, frozenset[int]]:
        import psutil

        wanted = set(ports)
        out = {port: frozenset[int]() for port in wanted}
        try:
            listening = [
                (c.laddr.port, c.pid) for c in psutil.net_connections(kind="tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port in wanted and c.pid
            ]
        except (psutil.AccessDenied, PermissionError):
            return out
        for port, pid in listening:
            try:
                proc = psutil.Process(pid)
                tree = {pid, *(child.pid for child in proc.children(recursive=True))}
            except psutil.Error:
                continue
            out[port] = out[port] | tree
        return out


def process_ids(processes: Iterable[object] | None) -> frozenset[int]:
    """Pids out of NVML's process-info structs (``.pid``)."""
    return frozenset(int(pid) for p in processes or () if (pid := getattr(p, "pid", None)) is not None)


def attribution_samples(
    gpu_pids: Mapping[tuple[tuple[str, str], ...], frozenset[int]],
    trees: Mapping[EngineTarget, frozenset[int]],
    ts_ms: int,
) -> list[Sample]:
    """One info sample per (target, GPU) sharing a process. ``gpu_pids`` is keyed by the GPU's
    identity labels (gpu, uuid, gpu_model, host ...)."""
    out: list[Sample] = []
    for labels, pids in gpu_pids.items():
        identity = dict(labels)
        extra = tuple((k, v) for k, v in labels if k in ("uuid", "host"))
        for target, tree in trees.items():
            if pids & tree:
                key = target_gpu_key(target.job, target.instance, identity.get("gpu", ""), "nvml", extra)
                out.append(Sample(key, ts_ms, 1.0))
    return out


def listener_trees(table: ProcessTable, targets: Sequence[EngineTarget]) -> dict[EngineTarget, frozenset[int]]:
    trees = table.listener_trees({t.port for t in targets})
    return {t: trees.get(t.port, frozenset()) for t in targets}
