"""Parse nccl-tests (``all_reduce_perf`` & co.) output into typed events.

Recognised lines (a missing leading ``#`` on header/footer lines is tolerated)::

    # nccl-tests version 2.17.1 nccl-headers=22605 ...      -> PerfHeader(version="2.17.1")
    # Collective test starting: all_reduce_perf              -> PerfStart(op="all_reduce")
    # nThread 1 nGpus 4 minBytes 8 maxBytes ...              -> PerfHeader(nthread=1, ngpus=4)
    #  Rank  0 Group  0 Pid   6899 on node-a device  0 [0000:04:00] NVIDIA H100 80GB HBM3
                                                             -> PerfRank(0, "node-a", 6899, 0)
    #       size  count  type  redop  root  time algbw busbw #wrong  time algbw busbw #wrong
           8       2    float   sum    -1   135.8  0.00  0.00    0   123.5  0.00  0.00    0
    # Avg bus bandwidth    : 70.742                          -> PerfAverage(70.742e9 B/s)
    # Collective test concluded: all_reduce_perf             -> PerfStart(op=..., concluded=True)

A result row is ``size count type redop [root]`` followed by the out-of-place and in-place
``time algbw busbw #wrong`` groups; ``#wrong`` may be ``N/A`` (validation off). Columns after
the two groups (timestamp column) are ignored. Rows name no collective: :mod:`.metrics` takes
it from the last ``Collective test starting`` line of the same file, else from the file name.
The header and ``Rank`` lines (old builds print no ``Group``) tell :mod:`.metrics` where a run
starts and on which hosts it ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from collector.nccl._common import GB, Parsed, parse_many, to_float, to_int

__all__ = ["PerfAverage", "PerfEvent", "PerfHeader", "PerfRank", "PerfResult", "PerfRow", "PerfStart",
           "op_from_name", "parse_line", "parse_lines"]


@dataclass(frozen=True, slots=True)
class PerfStart:
    op: str  # "all_reduce", "all_gather", "alltoall", ...
    concluded: bool = False


@dataclass(frozen=True, slots=True)
class PerfHeader:
    """A run's header line: ``# nccl-tests version ...`` or ``# nThread N nGpus M ...``."""

    version: str = ""
    nthread: int | None = None
    ngpus: int | None = None


@dataclass(frozen=True, slots=True)
class PerfRank:
    """``#  Rank  R Group  G Pid  P on HOST device  D [bus] NAME``: where one rank of the run ran."""

    rank: int
    host: str
    pid: int
    device: int


@dataclass(frozen=True, slots=True)
class PerfResult:
    time_seconds: float
    algo_bandwidth_bytes_per_second: float
    bus_bandwidth_bytes_per_second: float
    wrong: int | None  # None when printed as N/A


@dataclass(frozen=True, slots=True)
class PerfRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    out_of_place: PerfResult
    in_place: PerfResult


@dataclass(frozen=True, slots=True)
class PerfAverage:
    bus_bandwidth_bytes_per_second: float


PerfEvent = PerfStart | PerfHeader | PerfRank | PerfRow | PerfAverage

_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv",
        "scatter", "gather", "hypercube")
_START = re.compile(r"^#?\s*Collective test (?P<what>starting|concluded): (?P<prog>\S+)")
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(?P<bw>\S+)")
_VERSION = re.compile(r"^#?\s*nccl-tests version (?P<version>\S+)")
_THREADS = re.compile(r"^#?\s*nThread (?P<nthread>\d+) nGpus (?P<ngpus>\d+) ")
_RANK = re.compile(
    r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)"
)
_NAME = re.compile(r"(?<![a-z])(" + "|".join(_OPS) + r")(?:_perf|(?![a-z_]))")


def op_from_name(name: str) -> str | None:
    """``all_reduce_perf`` / ``.../nccl_tests_all_gather_perf_2node.txt`` -> ``all_gather``."""
    m = _NAME.search(name.lower())
    return m.group(1) if m else None


def _result(cols: list[str]) -> PerfResult | None:
    time_us, algbw, busbw = to_float(cols[0]), to_float(cols[1]), to_float(cols[2])
    wrong = None if cols[3] == "N/A" else to_int(cols[3])
    if time_us is None or algbw is None or busbw is None or (wrong is None and cols[3] != "N/A"):
        return None
    return PerfResult(time_us / 1e6, algbw * GB, busbw * GB, wrong)


def _row(tokens: list[str]) -> PerfRow | None:
    size, count = to_int(tokens[0]), to_int(tokens[1])
    if size is None or count is None or not tokens[2][:1].isalpha():
        return None
    root_text = tokens[4]
    has_root = to_int(root_text) is not None or root_text in {"none", "-"}
    rest = tokens[5:] if has_root else tokens[4:]
    if len(rest) < 8:
        return None
    oop, inp = _result(rest[0:4]), _result(rest[4:8])
    if oop is None or inp is None:
        return None
    return PerfRow(size, count, tokens[2], tokens[3], to_int(root_text) if has_root else None, oop, inp)


def _comment(text: str) -> PerfEvent | None:
    m = _START.match(text)
    if m:
        op = op_from_name(m["prog"]) or m["prog"].removesuffix("_perf")
        return PerfStart(op, m["what"] == "concluded")
    m = _AVG.match(text)
    if m:
        bw = to_float(m["bw"])
        return PerfAverage(bw * GB) if bw is not None else None
    m = _RANK.match(text)
    if m:
        return PerfRank(int(m["rank"]), m["host"], int(m["pid"]), int(m["dev"]))
    m = _THREADS.match(text)
    if m:
        return PerfHeader(nthread=int(m["nthread"]), ngpus=int(m["ngpus"]))
    m = _VERSION.match(text)
    if m:
        return PerfHeader(version=m["version"])
    return None


def parse_line(line: str) -> PerfEvent | None:
    text = line.strip()
    if not text:
        return None
    if text[0] == "#" or text[0].isalpha():
        return _comment(text)
    tokens = text.split()
    if len(tokens) < 12 or not tokens[0].isdigit():
        return None
    return _row(tokens)


def parse_lines(lines: Iterable[str]) -> Parsed[PerfEvent]:
    return parse_many(parse_line, lines)
