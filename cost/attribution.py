"""Which GPUs (or CPU node) each inference engine target runs on, from the
``infermeter_target_gpu_info`` series (written from the config or from NVML's processes; see
``collector/target_gpus.py``), resolved to the GPUs the cost calculator prices.

A GPU is named by its index on the target's host or by its UUID (which matches anywhere). The
host is the info series' ``host`` label when NVML wrote it, else the target instance's host
(loopback meaning this host). ``cpu`` names the target's host as a CPU node: priced per
node-hour (``cost.cpu_dollars_per_node_hour``) instead of per GPU.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

TARGET_GPU_INFO = "infermeter_target_gpu_info"  # collector.target_gpus writes it
CPU = "cpu"

Target = tuple[str, str]  # (job, instance) of an engine target


@dataclass(frozen=True)
class GpuRef:
    host: str
    gpu: str  # the index, as the gpu label of gpu_* series


def resolve(
    info: Iterable[Mapping[str, str]],
    gpus: Iterable[tuple[str, str, str]],
    node_of: Callable[[str], str],
) -> tuple[dict[Target, set[GpuRef]], dict[Target, str]]:
    """(target -> its GPUs, target -> the host of a CPU target) from the info series' labels and
    the priced GPUs as (host, index, uuid). Names that match no priced GPU are left out."""
    by_uuid = {uuid: GpuRef(host, gpu) for host, gpu, uuid in gpus if uuid}
    by_index = {(host, gpu) for host, gpu, _ in gpus}
    assigned: dict[Target, set[GpuRef]] = defaultdict(set)
    cpu: dict[Target, str] = {}
    for labels in info:
        target = (labels.get("target_job", ""), labels.get("target_instance", ""))
        name = labels.get("gpu", "")
        host = labels.get("host") or node_of(target[1])
        if name == CPU:
            cpu[target] = node_of(target[1])
            continue
        uuid = labels.get("uuid") or (name if name.startswith(("GPU-", "MIG-")) else "")
        if uuid and uuid in by_uuid:
            assigned[target].add(by_uuid[uuid])
        elif (host, name) in by_index:
            assigned[target].add(GpuRef(host, name))
    return dict(assigned), cpu


def gpu_model_shares(
    assigned: Mapping[Target, set[GpuRef]], target_tokens: Mapping[Target, Mapping[str, float]]
) -> dict[GpuRef, dict[str, float]]:
    """GPU -> model -> share of its cost: the models of the targets on it, by generated tokens
    (equal shares while none were generated)."""
    per_gpu: dict[GpuRef, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for target, refs in assigned.items():
        models = target_tokens.get(target) or {}
        for ref in refs:
            for model, tokens in models.items():
                per_gpu[ref][model] += tokens / len(refs)
            if not models:
                per_gpu[ref].setdefault("", 0.0)
    out: dict[GpuRef, dict[str, float]] = {}
    for ref, models in per_gpu.items():
        total = sum(models.values())
        out[ref] = {m: (v / total if total else 1 / len(models)) for m, v in models.items()}
    return out
