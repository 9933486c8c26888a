"""Parse ``NCCL_DEBUG`` output lines (NVIDIA/nccl ``src/debug.cc`` format) into typed events.

Line shapes (the ``[YYYY-MM-DD HH:MM:SS] `` prefix is optional; NCCL >= 2.26 prints it on WARN
lines by default, and any bracketed prefix starting with a digit is accepted)::

    host:pid:tid [dev] NCCL INFO <message>
    host:pid:tid [dev] <file>:<line> [(<func>)] NCCL WARN <message>
    NCCL version 2.27.3+cuda12.9                       (NCCL_DEBUG=VERSION, no prefix)

The bracketed number is the CUDA device of the thread, never the rank; ranks come from the
message text. Only messages that feed metrics become events; every other line (including
other NCCL INFO lines) is ``None``, i.e. ignored. Comm attribution across lines (a transport
line names no communicator) is left to :mod:`collector.nccl.metrics`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from collector.nccl._common import Parsed, parse_many, to_float

__all__ = [
    "ChannelSummary", "CommInit", "CommTopology", "DebugEvent", "EnvSetting", "InitTiming", "NcclVersion",
    "NcclWarning", "Origin", "TransportChannel", "parse_line", "parse_lines",
]


@dataclass(frozen=True, slots=True)
class Origin:
    host: str
    pid: int
    tid: int
    dev: int
    timestamp: str = ""  # the prefix text when present, e.g. "2025-08-22 17:44:36"

    @property
    def process(self) -> str:
        return f"{self.host}:{self.pid}"

    @property
    def thread(self) -> str:
        return f"{self.host}:{self.pid}:{self.tid}"


@dataclass(frozen=True, slots=True)
class NcclVersion:
    version: str  # e.g. "2.27.3+cuda12.9"
    origin: Origin | None


@dataclass(frozen=True, slots=True)
class CommInit:
    origin: Origin
    comm_ptr: str  # per-process pointer, e.g. "0x55b99fe024c0"
    rank: int
    nranks: int
    comm_id: str | None  # commId/commHash, shared by every rank of the communicator
    phase: str  # "START" | "COMPLETE"
    api: str  # e.g. "ncclCommInitRank"; "" on old builds


@dataclass(frozen=True, slots=True)
class CommTopology:
    origin: Origin
    comm_ptr: str
    rank: int
    nranks: int
    nnodes: int
    local_ranks: int


@dataclass(frozen=True, slots=True)
class TransportChannel:
    origin: Origin
    channel: int
    src: int  # rank
    dst: int  # rank (== src for CollNet lines, which name one rank)
    direction: str  # "send" | "receive" | ""
    transport: str  # P2P, SHM, NET/IB, NET/Socket, NET/<plugin>, CollNet, NVLS, ...
    path: str  # everything after "via ", e.g. "NET/IB/0/GDRDMA"


@dataclass(frozen=True, slots=True)
class ChannelSummary:
    origin: Origin
    coll: int
    collnet: int
    nvls: int
    p2p: int


@dataclass(frozen=True, slots=True)
class InitTiming:
    origin: Origin
    api: str
    rank: int
    nranks: int
    total_seconds: float


@dataclass(frozen=True, slots=True)
class NcclWarning:
    origin: Origin
    source: str  # source file ("transport/net.cc"), else the subsystem prefix ("NET/IB"), else "unknown"
    message: str


@dataclass(frozen=True, slots=True)
class EnvSetting:
    """``NCCL_X set by environment to Y`` (NCCL prints it for each parameter read from the
    environment; integer parameters end with a period, which is not part of the value)."""

    origin: Origin
    name: str
    value: str


DebugEvent = (
    NcclVersion | CommInit | CommTopology | TransportChannel | ChannelSummary | InitTiming | NcclWarning
    | EnvSetting
)

_PREFIX = re.compile(
    r"^(?:\[(?P<ts>\d[^\]]*)\] )?(?P<host>\S+?):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<src>[^\s:]+):\d+ (?:\([^)]*\) )?)?NCCL (?P<level>INFO|WARN)(?: (?P<msg>.*))?$"
)
_VERSION = re.compile(r"^NCCL version (\S+)")
_ENV = re.compile(r"^(?P<name>NCCL_\w+) set by environment to (?P<value>.*?)\s*$")
_INT_WITH_PERIOD = re.compile(r"^-?\d+\.$")
_INIT = re.compile(
    r"^(?:(?P<api>ncclCommInit\w*|ncclCommSplit\w*|ncclCommShrink\w*) )?comm (?P<ptr>0x[0-9a-fA-F]+) "
    r"rank (?P<rank>\d+) nranks (?P<nranks>\d+) .*?"
    r"(?:(?:commId|commHash) (?P<id>0x[0-9a-fA-F]+) .*?)?- Init (?P<phase>START|COMPLETE)\s*$"
)
_TOPO = re.compile(
    r"^comm (?P<ptr>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
    r"localRanks (?P<local>\d+)"
)
_CHANNEL = re.compile(
    r"^Channel (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+)\[[0-9a-fA-Fx]+\] -> (?P<dst>\d+)\[[0-9a-fA-Fx]+\]"
    r"(?: \[(?P<dir>send|receive|recv)\])? via (?P<path>.+?)\s*$"
)
_RING = re.compile(r"^Ring (?P<ch>\d+) : (?P<src>\d+) -> (?P<dst>\d+)(?: \[(?P<dir>send|receive|recv)\])? via (?P<path>.+?)\s*$")
_COLLNET = re.compile(
    r"^(?:CollNet|Coll) (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+) \[(?P<dir>send|receive|recv)\] via (?P<path>.+?)\s*$"
)
_SUMMARY = re.compile(
    r"^(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?(?:(?P<nvls>\d+) nvls channels, )?"
    r"(?P<p2p>\d+) p2p channels"
)
_TIMINGS = re.compile(
    r"^Init timings(?: - (?P<api>\w+))?: rank (?P<rank>\d+) nranks (?P<nranks>\d+) total (?P<total>[0-9.]+)"
)
_SUBSYS = re.compile(r"^(?P<sub>[A-Z][A-Za-z0-9_]*(?:/[A-Za-z0-9_]+)*) ?: ")


def transport_of(path: str) -> str:
    """``NET/IB/0/GDRDMA`` -> ``NET/IB``; ``P2P/IPC/read`` -> ``P2P``; ``COLLNET/..`` -> ``CollNet``."""
    parts = path.split("/")
    head = parts[0].strip().upper()
    if head == "NET" and len(parts) > 1:
        return f"NET/{parts[1].strip()}"
    if head == "COLLNET":
        return "CollNet"
    if head in {"P2P", "SHM", "NVLS"}:
        return head
    return parts[0].strip() or "unknown"


def _direction(raw: str | None) -> str:
    return "receive" if raw == "recv" else (raw or "")


def _info(origin: Origin, msg: str) -> DebugEvent | None:
    if msg.startswith("NCCL version "):
        m = _VERSION.match(msg)
        return NcclVersion(m.group(1), origin) if m else None
    if " set by environment to " in msg:
        m = _ENV.match(msg)
        if not m:
            return None
        value = m["value"]
        return EnvSetting(origin, m["name"], value[:-1] if _INT_WITH_PERIOD.match(value) else value)
    if msg.startswith("Channel ") or msg.startswith("Ring "):
        m = _CHANNEL.match(msg) or _RING.match(msg)
        if not m:
            return None
        path = m["path"]
        return TransportChannel(origin, int(m["ch"]), int(m["src"]), int(m["dst"]), _direction(m["dir"]),
                                transport_of(path), path)
    if msg.startswith("Coll"):
        m = _COLLNET.match(msg)
        if not m:
            return None
        rank = int(m["src"])
        return TransportChannel(origin, int(m["ch"]), rank, rank, _direction(m["dir"]), "CollNet", m["path"])
    if msg.startswith("Init timings"):
        m = _TIMINGS.match(msg)
        total = to_float(m["total"]) if m else None
        if m is None or total is None:
            return None
        return InitTiming(origin, m["api"] or "", int(m["rank"]), int(m["nranks"]), total)
    if " Init START" in msg or " Init COMPLETE" in msg:
        m = _INIT.match(msg)
        if not m:
            return None
        return CommInit(origin, m["ptr"], int(m["rank"]), int(m["nranks"]), m["id"], m["phase"], m["api"] or "")
    if msg.startswith("comm ") and " nNodes " in msg:
        m = _TOPO.match(msg)
        if not m:
            return None
        return CommTopology(origin, m["ptr"], int(m["rank"]), int(m["nranks"]), int(m["nnodes"]), int(m["local"]))
    if " coll channels," in msg:
        m = _SUMMARY.match(msg)
        if not m:
            return None
        return ChannelSummary(origin, int(m["coll"]), int(m["collnet"] or 0), int(m["nvls"] or 0), int(m["p2p"]))
    return None


def parse_line(line: str) -> DebugEvent | None:
    """One NCCL debug line (trailing newline allowed) -> event, or ``None`` when not of interest."""
    line = line.rstrip("\r\n")
    if line.startswith("NCCL version "):
        m = _VERSION.match(line)
        return NcclVersion(m.group(1), None) if m else None
    if "NCCL " not in line:
        return None
    m = _PREFIX.match(line)
    if m is None:
        return None
    origin = Origin(m["host"], int(m["pid"]), int(m["tid"]), int(m["dev"]), m["ts"] or "")
    msg = (m["msg"] or "").strip()
    if m["level"] == "WARN":
        source = m["src"]
        if not source:
            sub = _SUBSYS.match(msg)
            source = sub["sub"] if sub else "unknown"
        return NcclWarning(origin, source, msg)
    if m["src"]:  # an INFO line carrying file:line before "NCCL" is not a known shape
        return None
    return _info(origin, msg)


def parse_lines(lines: Iterable[str]) -> Parsed[DebugEvent]:
    return parse_many(parse_line, lines)
