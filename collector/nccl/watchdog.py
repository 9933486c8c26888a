"""Parse PyTorch ProcessGroupNCCL watchdog timeout lines into :class:`WatchdogTimeout` events.

Recognised (any prefix: torch 1.x ``[E ProcessGroupNCCL.cpp:737]``, torch >= 2.2 glog style
``[rank1]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607]``)::

    [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE,
        NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out.

``NumelIn``/``NumelOut`` are optional (old torch). The same text repeated inside a follow-up
("Process group watchdog thread terminated with exception: ...", the ``what():`` line of the
C++ abort) is the same timeout, so those lines are ignored rather than counted twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from collector.nccl._common import Parsed, parse_many

__all__ = ["WatchdogTimeout", "parse_line", "parse_lines"]


@dataclass(frozen=True, slots=True)
class WatchdogTimeout:
    rank: int
    seq: int
    op: str  # OpType as printed, e.g. ALLREDUCE, _REDUCE_SCATTER_BASE
    timeout_ms: int
    ran_for_ms: int | None
    numel_in: int | None
    numel_out: int | None


_TIMEOUT = re.compile(
    r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
    r"(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?"
    r"(?:, [^)]*?)?, Timeout\(ms\)=(?P<timeout>\d+)\)"
    r"(?: ran for (?P<ran>\d+) milliseconds)?"
)
_ECHOES = ("terminated with exception", "what():")


def parse_line(line: str) -> WatchdogTimeout | None:
    if "Watchdog caught" not in line:
        return None
    m = _TIMEOUT.search(line)
    if m is None:
        return None
    if any(echo in line[: m.start()] for echo in _ECHOES):
        return None
    return WatchdogTimeout(
        rank=int(m["rank"]),
        seq=int(m["seq"]),
        op=m["op"],
        timeout_ms=int(m["timeout"]),
        ran_for_ms=int(m["ran"]) if m["ran"] else None,
        numel_in=int(m["nin"]) if m["nin"] else None,
        numel_out=int(m["nout"]) if m["nout"] else None,
    )


def parse_lines(lines: Iterable[str]) -> Parsed[WatchdogTimeout]:
    return parse_many(parse_line, lines)
