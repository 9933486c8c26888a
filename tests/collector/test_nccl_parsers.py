"""The NCCL line parsers against hand-written lines in the real formats, and the captured files."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from collector.nccl import debug_lines, inspector, nccl_tests, watchdog
from collector.nccl.debug_lines import (
    ChannelSummary,
    CommInit,
    CommTopology,
    InitTiming,
    NcclVersion,
    NcclWarning,
    TransportChannel,
)
from collector.nccl.inspector import InspectorPerf
from collector.nccl.lines import parse_any
from collector.nccl.nccl_tests import PerfAverage, PerfHeader, PerfRank, PerfRow, PerfStart, op_from_name
from collector.nccl.watchdog import DesyncHeader, LaggingRanks, WatchdogTimeout, format_ranks
from tests.collector.nccl_fixtures import (
    DEBUG_LOG,
    DESYNC_LOG,
    NCCL_TESTS_OUT,
    VERSION_ONLY,
    WATCHDOG_LOG,
    WATCHDOG_VARIANTS,
    inspector_record,
    nccl_tests_output,
)

REF = Path("/work/shared/reference/samples")
CAPTURED = Path("/work/shared/data/captured")


T = TypeVar("T")


def _of(kind: type[T], events: Sequence[object]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def test_debug_lines_give_typed_events() -> None:
    parsed = debug_lines.parse_lines(DEBUG_LOG.splitlines())
    ev = parsed.events
    assert [v.version for v in _of(NcclVersion, ev)] == ["2.26.5+cuda12.8"]
    inits = _of(CommInit, ev)
    assert [(i.rank, i.nranks, i.comm_id, i.phase, i.api) for i in inits] == [
        (0, 2, "0xfeedbeef01", "START", "ncclCommInitAll"),
        (1, 2, "0xfeedbeef01", "START", "ncclCommInitAll"),
        (0, 2, "0xfeedbeef01", "COMPLETE", "ncclCommInitAll"),
    ]
    (topo,) = _of(CommTopology, ev)
    assert isinstance(topo, CommTopology) and (topo.comm_ptr, topo.nranks, topo.nnodes, topo.local_ranks) == ("0x5500aa", 2, 1, 2)
    (summary,) = _of(ChannelSummary, ev)
    assert summary == ChannelSummary(summary.origin, 2, 2, 4, 2)
    timings = _of(InitTiming, ev)
    assert [(t.rank, t.total_seconds, t.api) for t in timings] == [(0, 1.25, "ncclCommInitAll"), (1, 1.5, "ncclCommInitAll")]
    transports = [(t.channel, t.src, t.dst, t.direction, t.transport) for t in _of(TransportChannel, ev)]
    assert transports == [
        (0, 0, 1, "", "P2P"), (1, 0, 1, "", "P2P"), (0, 1, 0, "", "SHM"), (0, 1, 0, "", "SHM"),
        (0, 1, 0, "receive", "NET/IB"), (1, 0, 1, "send", "NET/Socket"), (0, 0, 0, "send", "CollNet"),
    ]
    # Bootstrap, "Channel 00/02 : 0 1" ring order, "-> 6" trail, Connected, blank and training lines.
    assert parsed.ignored == 6


def test_warn_lines_with_and_without_timestamp_prefix() -> None:
    stamped = "[2026-01-05 09:15:02] node7:4100:4151 [1] misc/socket.cc:481 NCCL WARN Connect failed"
    plain = "node7:4100:4151 [1] misc/socket.cc:481 NCCL WARN Connect failed"
    with_func = "node7:4100:4151 [1] transport/net_ib.cc:1020 (ncclIbConnect) NCCL WARN NET/IB : peer not ready"
    old = "node7:4100:4151 [1] NCCL WARN NET/Socket : no usable interface"
    a, b = debug_lines.parse_line(stamped), debug_lines.parse_line(plain)
    assert isinstance(a, NcclWarning) and isinstance(b, NcclWarning)
    assert a.origin.timestamp == "2026-01-05 09:15:02" and b.origin.timestamp == ""
    assert a.source == b.source == "misc/socket.cc" and a.message == "Connect failed"
    assert a.origin.host == "node7" and a.origin.pid == 4100 and a.origin.dev == 1
    c, d = debug_lines.parse_line(with_func), debug_lines.parse_line(old)
    assert isinstance(c, NcclWarning) and c.source == "transport/net_ib.cc"
    assert isinstance(d, NcclWarning) and d.source == "NET/Socket"


def test_info_lines_with_timestamp_prefix_and_variants() -> None:
    line = "[2026-01-05 09:15:02] node7:4100:4100 [0] NCCL INFO NCCL version 2.28.3+cuda13.0"
    event = debug_lines.parse_line(line)
    assert isinstance(event, NcclVersion) and event.version == "2.28.3+cuda13.0"
    bare = debug_lines.parse_line(VERSION_ONLY)
    assert isinstance(bare, NcclVersion) and bare.version == "2.21.5+cuda12.4" and bare.origin is None
    old_init = debug_lines.parse_line("old-host:11:12 [0] NCCL INFO comm 0x7f01 rank 3 nranks 8 cudaDev 0 nvmlDev 0 - Init COMPLETE")
    assert isinstance(old_init, CommInit) and old_init.comm_id is None and old_init.api == "" and old_init.rank == 3
    ring = debug_lines.parse_line("old-host:11:12 [0] NCCL INFO Ring 01 : 3 -> 4 [send] via NET/Socket/0")
    assert isinstance(ring, TransportChannel) and (ring.channel, ring.src, ring.dst, ring.transport) == (1, 3, 4, "NET/Socket")
    timing = debug_lines.parse_line("h:1:2 [0] NCCL INFO Init timings: rank 0 nranks 4 total 0.42 (kernels 0.1)")
    assert isinstance(timing, InitTiming) and timing.total_seconds == 0.42 and timing.api == ""
    plugin = debug_lines.parse_line("h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/AWS Libfabric/0")
    assert isinstance(plugin, TransportChannel) and plugin.transport == "NET/AWS Libfabric"


@pytest.mark.parametrize("line", [
    "", "garbage", "NCCL INFO", "h:x:2 [0] NCCL INFO NCCL version 2", "h:1:2 [a] NCCL WARN x",
    "h:1:2 [0] NCCL INFO comm 0xZZ rank 1 nranks 2 - Init COMPLETE",
    "h:1:2 [0] NCCL INFO Init timings - x: rank 1 nranks 2 total abc",
    "h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> via",
    "\x00\xff" * 50, "{" * 10000,
])
def test_bad_lines_are_ignored_not_raised(line: str) -> None:
    assert debug_lines.parse_line(line) is None
    assert watchdog.parse_line(line) is None
    assert inspector.parse_line(line) is None
    assert nccl_tests.parse_line(line) is None
    parse_any(line)  # never raises


def test_watchdog_timeouts_count_once_per_timeout() -> None:
    parsed = watchdog.parse_lines(WATCHDOG_LOG.splitlines())
    assert parsed.events == [
        WatchdogTimeout(rank=2, seq=4242, op="ALLGATHER", timeout_ms=300000, ran_for_ms=300007, numel_in=1024, numel_out=4096,
                        logged="01-05 09:20:11"),
        WatchdogTimeout(rank=5, seq=77, op="BROADCAST", timeout_ms=1800000, ran_for_ms=1800500, numel_in=None, numel_out=None),
    ]
    assert parsed.ignored == 4


def test_watchdog_variants_of_other_torch_generations() -> None:
    parsed = watchdog.parse_lines(WATCHDOG_VARIANTS.splitlines())
    assert [(e.rank, e.seq, e.op, e.timeout_ms, e.ran_for_ms, e.pg, e.logged) for e in parsed.events
            if isinstance(e, WatchdogTimeout)] == [
        (6, 31, "_ALLGATHER_BASE", 120000, 120094, "tp_group", "02-12 04:11:09"),  # "[PG ID .. (name) Rank 6]" prefix
        (12, 77, "REDUCE_SCATTER", 600000, 600110, "", "03-07 22:01:45"),  # rank from "[rank12]:", month unpadded
        (None, 3, "BARRIER", 10000, 10250, "", ""),  # no rank anywhere
    ]
    assert parsed.ignored == 2  # the DistBackendError echo and the peer's dump-signal line


def test_desync_report_names_the_lagging_ranks() -> None:
    events = [e for e in map(parse_any, DESYNC_LOG.splitlines()) if e is not None]
    assert [type(e).__name__ for e in events] == [
        "WatchdogTimeout", "DesyncHeader", "LaggingRanks", "WatchdogTimeout", "WatchdogTimeout", "DesyncHeader", "LaggingRanks",
    ]
    assert events[1] == DesyncHeader(0, "ALLREDUCE", 12) and events[5] == DesyncHeader(4, "ALLREDUCE", 41208)
    assert events[2] == LaggingRanks((2, 3), "never_joined", None, None)
    assert events[6] == LaggingRanks((6,), "not_joined_next", 41207, None)
    stuck = watchdog.parse_line("[rank1]: \t   - [1, 3, 2] joined but didn't finish collective #5 (count from 1)")
    assert stuck == LaggingRanks((1, 2, 3), "not_finished", 5, 1)
    assert format_ranks([9, 0, 1, 2, 3, 7, 10, 3]) == "0-3,7,9-10" and format_ranks([]) == ""


def test_inspector_json_lines() -> None:
    coll = inspector.parse_line(inspector_record(rank=3, op="AllReduce", size=8 << 20, exec_us=1500, busbw=300.0))
    assert isinstance(coll, InspectorPerf)
    assert (coll.kind, coll.op, coll.rank, coll.size_bytes, coll.n_ranks, coll.comm_id) == ("coll", "AllReduce", 3, 8 << 20, 4, "0xabc123")
    assert coll.exec_seconds == pytest.approx(0.0015) and coll.bus_bandwidth_bytes_per_second == pytest.approx(300e9)
    assert coll.algo_bandwidth_bytes_per_second == pytest.approx(200e9) and coll.timing_source == "kernel_gpu"
    p2p = inspector.parse_line(inspector_record(rank=0, op="Send", p2p=True))
    assert isinstance(p2p, InspectorPerf) and (p2p.kind, p2p.op, p2p.peer) == ("p2p", "Send", 1)
    bad = [
        '{"header":{"rank":1},"coll_perf":{"coll":"AllReduce"}}',  # no size / time
        '{"header":{"rank":"1"},"coll_perf":{"coll":"AllReduce","coll_msg_size_bytes":8,"coll_exec_time_us":1}}',
        inspector_record(rank=1)[:-20],  # truncated mid-write
        '["coll_perf"]', '{"metadata":{}, "coll_perf":{}}',
    ]
    parsed = inspector.parse_lines(bad)
    assert parsed.events == [] and parsed.ignored == len(bad)


def test_nccl_tests_table() -> None:
    parsed = nccl_tests.parse_lines(NCCL_TESTS_OUT.splitlines())
    starts, rows, avgs = _of(PerfStart, parsed.events), _of(PerfRow, parsed.events), _of(PerfAverage, parsed.events)
    assert starts == [PerfStart("reduce_scatter"), PerfStart("reduce_scatter", concluded=True)]
    assert len(rows) == 3
    first, last = rows[0], rows[-1]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (1024, 64, "float", "sum", -1)
    assert first.out_of_place.time_seconds == pytest.approx(20.5e-6)
    assert first.out_of_place.bus_bandwidth_bytes_per_second == pytest.approx(0.04e9)
    assert first.in_place.algo_bandwidth_bytes_per_second == pytest.approx(0.05e9) and first.in_place.wrong == 0
    assert last.out_of_place.wrong is None and last.in_place.bus_bandwidth_bytes_per_second == pytest.approx(0.15e9)
    assert _of(PerfHeader, parsed.events) == [PerfHeader(version="2.17.1"), PerfHeader(nthread=1, ngpus=4)]
    assert avgs == [PerfAverage(pytest.approx(0.0867e9))]  # type: ignore[arg-type]
    assert op_from_name("nccl_tests_all_gather_perf_2node.txt") == "all_gather"
    assert op_from_name("alltoall_perf.log") == "alltoall" and op_from_name("train.log") is None


def test_nccl_tests_rank_lines_old_and_new() -> None:
    new = nccl_tests.parse_lines(nccl_tests_output(["node-a", "node-b"], 2, 100.0).splitlines()).events
    assert _of(PerfRank, new) == [PerfRank(0, "node-a", 4000, 0), PerfRank(1, "node-a", 4001, 1),
                                  PerfRank(2, "node-b", 4002, 0), PerfRank(3, "node-b", 4003, 1)]
    old = nccl_tests.parse_line("#   Rank  3 Pid  21094 on dgx-07 device  3 [0x3b] Tesla V100-SXM2-32GB")
    bare = nccl_tests.parse_line("  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3")
    assert old == PerfRank(3, "dgx-07", 21094, 3) and bare == PerfRank(0, "ztan-mig-235z", 6899, 0)


def test_nccl_tests_row_without_root_column_and_extra_timestamp_column() -> None:
    no_root = nccl_tests.parse_line("  8  2  float  sum  30.1  0.00  0.00  0  29.0  0.00  0.00  0")
    assert isinstance(no_root, PerfRow) and no_root.root is None and no_root.in_place.time_seconds == pytest.approx(29e-6)
    extra = nccl_tests.parse_line("  8  2  float  sum  -1  30.1  0.00  0.00  0  29.0  0.00  0.00  0  1767600000")
    assert isinstance(extra, PerfRow) and extra.root == -1


# -- captured / reference files (read-only, never copied) -----------------------------------


def _need(path: Path) -> list[str]:
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def test_captured_nccl_debug_files() -> None:
    for path in (REF / "nccl_debug_info_lines.txt", CAPTURED / "nccl_debug_info_deepspeed_2node_g5_efa.log"):
        parsed = debug_lines.parse_lines(_need(path))
        kinds = Counter(type(e).__name__ for e in parsed.events)
        assert kinds["CommInit"] >= 4 and kinds["TransportChannel"] >= 6 and kinds["NcclVersion"] >= 1, (path, kinds)
        for event in parsed.events:
            if isinstance(event, CommInit | CommTopology):
                assert 0 <= event.rank < event.nranks <= 1024
            if isinstance(event, InitTiming):
                assert 0 < event.total_seconds < 600
    deepspeed = debug_lines.parse_lines(_need(CAPTURED / "nccl_debug_info_deepspeed_2node_g5_efa.log")).events
    assert {e.transport for e in deepspeed if isinstance(e, TransportChannel)} == {"NET/AWS Libfabric"}
    assert {e.nnodes for e in deepspeed if isinstance(e, CommTopology)} == {2}


def test_captured_watchdog_file() -> None:
    parsed = watchdog.parse_lines(_need(REF / "pytorch_nccl_watchdog_timeout.txt"))
    events = _of(WatchdogTimeout, parsed.events)
    assert len(events) == len(parsed.events) == 6  # every genuine "Watchdog caught" line, echoes excluded
    assert {e.op for e in events} == {"ALLREDUCE", "_REDUCE_SCATTER_BASE"}
    assert all(e.timeout_ms in (600000, 1800000) for e in events)
    assert sum(e.numel_in is None for e in events) == 2  # torch 1.x lines
    assert [e.rank for e in events] == [1, 0, 0, 1, 1, 3] and all(e.ran_for_ms for e in events)
    assert sum(bool(e.logged) for e in events) == 4 and events[0].logged == "06-26 06:24:44"  # c10's "E626"


def test_captured_inspector_examples() -> None:
    path = REF / "nccl_inspector_readme_examples.json"
    _need(path)
    records = json.loads(path.read_text())
    lines = [json.dumps(r, separators=(",", ":")) for r in records]  # the README pretty-prints; the plugin writes lines
    parsed = inspector.parse_lines(lines)
    assert [(e.op, e.rank) for e in parsed.events] == [("AllReduce", 2), ("ReduceScatter", 4)]
    assert all(1e9 < (e.bus_bandwidth_bytes_per_second or 0) < 2e12 for e in parsed.events)
    assert inspector.parse_lines(path.read_text().splitlines()).events == []  # pretty-printed lines: ignored, no error


@pytest.mark.parametrize("path", [
    REF / "nccl_tests_all_reduce_perf_h100_16gpu.txt",
    CAPTURED / "nccl_tests_all_reduce_perf_2node_16xH100_a3mega.txt",
])
def test_captured_nccl_tests_tables(path: Path) -> None:
    parsed = nccl_tests.parse_lines(_need(path))
    rows = [e for e in parsed.events if isinstance(e, PerfRow)]
    assert len(rows) == 31 and rows[0].size_bytes == 8 and rows[-1].size_bytes == 8589934592
    assert all(r.out_of_place.wrong == 0 for r in rows)
    assert 300e9 < rows[-1].out_of_place.bus_bandwidth_bytes_per_second < 400e9
    assert [e for e in parsed.events if isinstance(e, PerfAverage)] == [PerfAverage(pytest.approx(70.742e9))]  # type: ignore[arg-type]
    assert op_from_name(path.name) == "all_reduce"
    ranks = _of(PerfRank, parsed.events)
    assert len(ranks) == 16 and len({r.host for r in ranks}) == 2 and ranks[0].host == "ztan-mig-235z"
    assert _of(PerfHeader, parsed.events) == [PerfHeader(nthread=1, ngpus=1)]
