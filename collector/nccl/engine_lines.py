"""Engine log lines that sit next to NCCL's in the same files: PyTorch's ProcessGroupNCCL
environment report and vLLM's expert-parallel load balancer (EPLB) step report.

Shapes (PyTorch ``ProcessGroupNCCL.cpp``, glog prefix; vLLM ``distributed/eplb/eplb_state.py``)::

    I20241209 23:39:42.495654 1385591 ProcessGroupNCCL.cpp:914] [PG ID 0 PG GUID 0 Rank 1] ProcessGroupNCCL
        environments: NCCL version: 2.20.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 1, ..., TORCH_NCCL_BLOCKING_WAIT: 0, ...
    INFO 08-22 17:44:36 [eplb_state.py:301] EPLB step: 12 for model deepseek-v3: avg_tokens=812.50, max_tokens=1204,
        balancedness=0.6748, steps until the next rearrangement: 2988
    INFO 08-22 17:44:36 [eplb_state.py:301] EPLB step: avg_tokens=812.50, max_tokens=1204, balancedness=0.6748

PyTorch prints the *effective* value of each setting (its default when the variable is unset,
and the deprecated ``NCCL_BLOCKING_WAIT`` / ``NCCL_ASYNC_ERROR_HANDLING`` under their
``TORCH_NCCL_`` names), so these are compared as they are. The glog prefix names a thread, not a
host: the host is the one the file's NCCL lines name, else the collector's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collector.nccl._common import to_float

_TORCH_ENV = re.compile(r"(?:\[(?:PG[^\]]*?)Rank (?P<rank>\d+)\] )?ProcessGroupNCCL environments: (?P<body>.*?)\s*$")
_EPLB = re.compile(
    r"EPLB step: (?:\d+ for model (?P<model>\S+?): )?avg_tokens=(?P<avg>[\d.]+), max_tokens=(?P<max>\d+), "
    r"balancedness=(?P<bal>[\d.]+)"
)


@dataclass(frozen=True, slots=True)
class TorchNcclEnvironment:
    rank: int | None
    nccl_version: str  # "" when the line has none
    settings: tuple[tuple[str, str], ...]  # (TORCH_NCCL_..., value), as printed


@dataclass(frozen=True, slots=True)
class EplbStep:
    model: str  # "" on vLLM versions that do not name it
    avg_tokens: float
    max_tokens: float
    balancedness: float  # avg / max tokens per EP rank, 1.0 = balanced


EngineLineEvent = TorchNcclEnvironment | EplbStep


def may_match(line: str) -> bool:
    return "ProcessGroupNCCL environments:" in line or "EPLB step:" in line


def parse_line(line: str) -> EngineLineEvent | None:
    if "EPLB step:" in line:
        m = _EPLB.search(line)
        if m is None:
            return None
        avg, bal = to_float(m["avg"]), to_float(m["bal"])
        if avg is None or bal is None:
            return None
        return EplbStep(m["model"] or "", avg, float(m["max"]), bal)
    m = _TORCH_ENV.search(line)
    if m is None:
        return None
    version, settings = "", []
    for part in m["body"].split(", "):
        key, sep, value = part.partition(": ")
        if not sep:
            continue
        if key == "NCCL version":
            version = value.strip()
        elif key.startswith(("TORCH_NCCL_", "NCCL_", "TORCH_DISTRIBUTED_")):
            settings.append((key, value.strip()))
    rank = int(m["rank"]) if m["rank"] else None
    return TorchNcclEnvironment(rank, version, tuple(settings))
