"""Parse PyTorch ProcessGroupNCCL watchdog timeouts and the desync report that names lagging ranks.

Timeout lines (any prefix: torch 1.x ``[E ProcessGroupNCCL.cpp:737] [Rank 1] ...``, torch >= 2.2
glog style ``[rank1]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank 1] ...``, newer
``logPrefix()`` style ``[PG ID 0 PG GUID 0(default_pg) Rank 1] ...``, ``srun -l`` ``12: ``)::

    [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE,
        NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out.

become :class:`WatchdogTimeout`. The reporting rank is the ``Rank N]`` just before the message,
else the ``[rankN]:`` line prefix, else unknown (``None``); ``NumelIn``/``NumelOut`` and the
``ran for`` part are optional (old torch, exception texts). The same text repeated inside a
follow-up (``Process group watchdog thread terminated with exception: ...``, the ``what():``
line of the C++ abort, a ``...Error: `` exception echo) is the same timeout, so those lines are
ignored rather than counted twice.

With ``TORCH_NCCL_DESYNC_DEBUG=1`` the timeout is followed by a report (``TraceUtils.h``
``retrieveDesyncReport``), continuation lines (``\\t``-indented) without a prefix::

     - [0] Timeout at collective: ALLREDUCE, #5                      -> DesyncHeader
     - To our best knowledge, ranks [1, 2] are the lagging ranks that caused this timeout.
       They never joined any collectives                             -> LaggingRanks(never_joined)
       - [47] joined but didn't finish collective #41207 (count from 1)   -> LaggingRanks(not_finished)
         [0, 1] finished collective #41207, but didn't join collective #41208 (count from 1)
                                                                      -> LaggingRanks(not_joined_next)

:mod:`.metrics` attaches lagging ranks to the latest timeout of the same file (of the rank the
header names, when it names one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from collector.nccl._common import Parsed, parse_many

__all__ = ["DesyncHeader", "LaggingRanks", "WatchdogEvent", "WatchdogTimeout", "format_ranks", "may_match",
           "parse_line", "parse_lines"]


@dataclass(frozen=True, slots=True)
class WatchdogTimeout:
    rank: int | None  # the reporting (timed-out) rank; None when the line names none
    seq: int
    op: str  # OpType as printed, e.g. ALLREDUCE, _REDUCE_SCATTER_BASE
    timeout_ms: int
    ran_for_ms: int | None
    numel_in: int | None
    numel_out: int | None
    pg: str = ""  # process group from a "[PG ... Rank N]" prefix: its name ("default_pg"), else its id
    logged: str = ""  # glog time of the line, "MM-DD HH:MM:SS" (no year in glog); "" without one


@dataclass(frozen=True, slots=True)
class DesyncHeader:
    """``[r] Timeout at collective: OP, #seq``: the start of rank r's desync report."""

    rank: int
    op: str
    seq: int


@dataclass(frozen=True, slots=True)
class LaggingRanks:
    ranks: tuple[int, ...]  # sorted, distinct
    reason: str  # "never_joined" | "not_finished" | "not_joined_next"
    seq: int | None  # the collective # the report names (counted from 1), when it names one
    reporter: int | None  # from a "[rankN]:" line prefix, when the line has one


WatchdogEvent = WatchdogTimeout | DesyncHeader | LaggingRanks

_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
    r"(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?"
    r"(?:, [^)]*?)?, Timeout\(ms\)=(?P<timeout>\d+)\)"
    r"(?: ran for (?P<ran>\d+) milliseconds)?"
)
_PREFIX_RANK = re.compile(r"Rank (\d+)\]\s*$")  # "[Rank 1] " / "[PG ID 0 PG GUID 0(default_pg) Rank 1] "
_LINE_RANK = re.compile(r"\[rank(\d+)\]:")  # torch >= 2.2 / torchrun line prefix
_PG = re.compile(r"\[PG (?:ID )?(?P<id>\d+)(?: PG GUID \w*)?\s*(?:\((?P<name>[^)]*)\))? Rank \d+\]\s*$")
_GLOG = re.compile(r"\[[EWIF](?P<month>\d{1,2})(?P<day>\d\d) (?P<time>\d\d:\d\d:\d\d)")  # c10: "E626", glog: "E0626"
_ECHOES = ("terminated with exception", "what():", "Error: ")
_HEADER = re.compile(r"\[(?P<rank>\d+)\] Timeout at collective: (?P<op>\w+), #(?P<seq>\d+)")
_RANKS = r"\[(?P<ranks>\d+(?:,\s*\d+)*)\]"
_LAGGING = (
    (re.compile(r"ranks " + _RANKS + r" are the lagging ranks"), "never_joined"),
    (re.compile(_RANKS + r" joined but didn't finish collective #(?P<seq>\d+)"), "not_finished"),
    (re.compile(_RANKS + r" finished collective #(?P<seq>\d+), but didn't join collective #"), "not_joined_next"),
)
_MARKERS = ("Watchdog caught", "Timeout at collective", "lagging ranks", "collective #")


def may_match(line: str) -> bool:
    """Cheap test: can :func:`parse_line` give an event for this line?"""
    return any(marker in line for marker in _MARKERS)


def format_ranks(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 7, 9, 10]`` -> ``"0-3,7,9-10"`` (compact, for a label)."""
    out: list[str] = []
    ordered = sorted(set(ranks))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _line_rank(text: str) -> int | None:
    m = _LINE_RANK.search(text)
    return int(m.group(1)) if m else None


def _timeout(line: str, m: re.Match[str]) -> WatchdogTimeout | None:
    before = line[: m.start()]
    if any(echo in before for echo in _ECHOES):
        return None
    own = _PREFIX_RANK.search(before)
    rank = int(own.group(1)) if own else _line_rank(before)
    pg = _PG.search(before)
    glog = _GLOG.search(before)
    return WatchdogTimeout(
        rank=rank,
        seq=int(m["seq"]),
        op=m["op"],
        timeout_ms=int(m["timeout"]),
        ran_for_ms=int(m["ran"]) if m["ran"] else None,
        numel_in=int(m["nin"]) if m["nin"] else None,
        numel_out=int(m["nout"]) if m["nout"] else None,
        pg=(pg["name"] or pg["id"]) if pg else "",
        logged=f"{int(glog['month']):02d}-{glog['day']} {glog['time']}" if glog else "",
    )


def parse_line(line: str) -> WatchdogEvent | None:
    if "Watchdog caught" in line:
        m = _TIMEOUT.search(line)
        return _timeout(line, m) if m else None
    if "Timeout at collective" in line:
        h = _HEADER.search(line)
        return DesyncHeader(int(h["rank"]), h["op"], int(h["seq"])) if h else None
    if "lagging ranks" in line or "collective #" in line:
        for pattern, reason in _LAGGING:
            lag = pattern.search(line)
            if lag:
                ranks = tuple(sorted({int(r) for r in lag["ranks"].split(",")}))
                seq = lag.groupdict().get("seq")
                return LaggingRanks(ranks, reason, int(seq) if seq else None, _line_rank(line[: lag.start()]))
    return None


def parse_lines(lines: Iterable[str]) -> Parsed[WatchdogEvent]:
    return parse_many(parse_line, lines)
