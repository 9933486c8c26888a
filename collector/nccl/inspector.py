"""Parse NCCL Inspector profiler-plugin JSON lines (one compact object per completed operation).

::

    {"header":{"id":"0x7f8c...","comm_name":"...","rank":2,"n_ranks":8,"nnodes":1},
     "metadata":{...},
     "coll_perf":{"coll":"AllReduce","coll_sn":1407,"coll_msg_size_bytes":17179869184,
                  "coll_exec_time_us":61974,"coll_algobw_gbs":277.21,"coll_busbw_gbs":485.12}}

P2P records carry ``"p2p_perf"`` with ``p2p``/``p2p_*`` keys instead. GB/s are converted to
bytes/s (x 1e9) and microseconds to seconds. Anything that is not such an object (other JSON,
a truncated line, wrong types) is ``None``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collector.nccl._common import GB, Parsed, parse_many

__all__ = ["InspectorPerf", "parse_line", "parse_lines", "parse_record"]


@dataclass(frozen=True, slots=True)
class InspectorPerf:
    kind: str  # "coll" | "p2p"
    op: str  # AllReduce, ReduceScatter, ..., Send, Recv
    rank: int
    n_ranks: int | None
    comm_id: str
    comm_name: str
    seq: int | None
    size_bytes: int
    exec_seconds: float
    algo_bandwidth_bytes_per_second: float | None
    bus_bandwidth_bytes_per_second: float | None
    peer: int | None = None
    timing_source: str = ""


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def _int(value: object) -> int | None:
    number = _num(value)
    return int(number) if number is not None and number == int(number) else None


def parse_record(record: Mapping[str, object]) -> InspectorPerf | None:
    header = record.get("header")
    if not isinstance(header, Mapping):
        return None
    for kind in ("coll", "p2p"):
        perf = record.get(f"{kind}_perf")
        if isinstance(perf, Mapping):
            break
    else:
        return None
    op, rank = perf.get(kind), _int(header.get("rank"))
    size, exec_us = _int(perf.get(f"{kind}_msg_size_bytes")), _num(perf.get(f"{kind}_exec_time_us"))
    if not isinstance(op, str) or not op or rank is None or size is None or exec_us is None:
        return None
    algbw, busbw = _num(perf.get(f"{kind}_algobw_gbs")), _num(perf.get(f"{kind}_busbw_gbs"))
    comm_id, comm_name, source = header.get("id"), header.get("comm_name"), perf.get(f"{kind}_timing_source")
    return InspectorPerf(
        kind=kind,
        op=op,
        rank=rank,
        n_ranks=_int(header.get("n_ranks")),
        comm_id=comm_id if isinstance(comm_id, str) else "",
        comm_name=comm_name if isinstance(comm_name, str) else "",
        seq=_int(perf.get(f"{kind}_sn")),
        size_bytes=size,
        exec_seconds=exec_us / 1e6,
        algo_bandwidth_bytes_per_second=None if algbw is None else algbw * GB,
        bus_bandwidth_bytes_per_second=None if busbw is None else busbw * GB,
        peer=_int(perf.get("p2p_peer")) if kind == "p2p" else None,
        timing_source=source if isinstance(source, str) else "",
    )


def parse_line(line: str) -> InspectorPerf | None:
    text = line.strip()
    if not text.startswith("{") or '_perf"' not in text:
        return None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return parse_record(record) if isinstance(record, dict) else None


def parse_lines(lines: Iterable[str]) -> Parsed[InspectorPerf]:
    return parse_many(parse_line, lines)
