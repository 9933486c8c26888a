"""NcclLogSource: incremental reads, partial lines, rotation, truncation, restarts, failures."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import IO

from collector.nccl import NcclLogSource
from collector.nccl.metrics import MAX_TIMEOUT_EVENTS
from collector.source import ScrapeResult
from store.clock import ManualClock
from tests.collector.nccl_fixtures import (
    DEBUG_LOG,
    DESYNC_LOG,
    INSPECTOR_PROM,
    NCCL_TESTS_OUT,
    WATCHDOG_LOG,
    inspector_record,
    nccl_tests_output,
    timeout_line,
)

WARN = "node7:4100:4151 [1] misc/socket.cc:481 NCCL WARN Connect failed\n"
WARN_TS = "[2026-01-05 09:15:02] node7:4100:4151 [1] misc/socket.cc:481 NCCL WARN Connect failed\n"


def values(result: ScrapeResult) -> dict[str, float]:
    return {s.series.canonical(): s.value for s in result.batch.samples()}


def warnings(result: ScrapeResult) -> float:
    return values(result).get('nccl_warnings_total{source="misc/socket.cc"}', 0.0)


def make(tmp_path: Path, *globs: str) -> NcclLogSource:
    patterns = globs or (str(tmp_path / "logs" / "*.log"),)
    return NcclLogSource(list(patterns), tmp_path / "state.json", ManualClock(1_000))


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def test_all_metrics_from_a_debug_log(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank.log").write_text(DEBUG_LOG + WATCHDOG_LOG)
    result = make(tmp_path).collect_sync(1_000)
    assert result.health.up
    v = values(result)
    comm = "0xfeedbeef01"
    assert v['nccl_info{version="2.26.5+cuda12.8"}'] == 1
    assert v[f'nccl_comm_ranks{{comm="{comm}"}}'] == 2 and v[f'nccl_comm_nodes{{comm="{comm}"}}'] == 1
    assert v[f'nccl_init_seconds{{comm="{comm}"}}'] == 1.5  # slowest rank
    assert v[f'nccl_transport_channels{{comm="{comm}",transport="P2P"}}'] == 2
    assert v[f'nccl_transport_channels{{comm="{comm}",transport="SHM"}}'] == 1  # a repeated link counts once
    assert v[f'nccl_transport_channels{{comm="{comm}",transport="NET/IB"}}'] == 1
    assert v[f'nccl_transport_channels{{comm="{comm}",transport="NET/Socket"}}'] == 1
    assert v[f'nccl_transport_channels{{comm="{comm}",transport="CollNet"}}'] == 1
    assert v[f'nccl_transport_channels{{comm="{comm}",transport="NVLS"}}'] == 4
    assert v['nccl_warnings_total{source="misc/socket.cc"}'] == 1
    assert v['nccl_warnings_total{source="transport/net_ib.cc"}'] == 1
    assert v['nccl_timeouts_total{op="ALLGATHER",rank="2"}'] == 1 and v['nccl_timeouts_total{op="BROADCAST",rank="5"}'] == 1
    assert v['nccl_last_timeout_seqnum{rank="2"}'] == 4242 and v['nccl_timeout_setting_seconds{rank="5"}'] == 1800
    counters = {k.canonical() for k in result.batch.keys if k.name.endswith("_total")}
    zeros = [s for s in result.batch.samples() if s.ts_ms != 1_000]
    assert {s.series.canonical() for s in zeros} == counters and all(s.ts_ms == 999 and s.value == 0 for s in zeros)


def test_inspector_lines_nccl_tests_and_prom_textfile(tmp_path: Path) -> None:
    (tmp_path / "insp").mkdir()
    (tmp_path / "insp" / "node7-pid4100.log").write_text(
        inspector_record(rank=1, op="AllGather", size=1 << 20, exec_us=250, busbw=120.5) + "\n"
        + inspector_record(rank=1, op="AllGather", size=1 << 20, exec_us=200, busbw=150.0) + "\n"
    )
    (tmp_path / "insp" / "nccl_inspector_metrics_GPU-1.prom").write_text(INSPECTOR_PROM)
    (tmp_path / "insp" / "bench.log").write_text(NCCL_TESTS_OUT)
    result = make(tmp_path, str(tmp_path / "insp" / "*")).collect_sync(1_000)
    assert result.health.up, result.health.error
    v = values(result)
    labels = f'op="AllGather",rank="1",size_bytes="{1 << 20}"'
    assert v[f"nccl_collective_bus_bandwidth_bytes_per_second{{{labels}}}"] == 150e9  # latest record wins
    assert abs(v[f"nccl_collective_exec_seconds{{{labels}}}"] - 200e-6) < 1e-12
    assert any(k.startswith("nccl_bus_bandwidth_gbs{") and x == 120.5 for k, x in v.items())  # passed through
    # no "Rank" lines: nranks is nThread x nGpus, host and nodes unknown
    rs = 'host="unknown",inplace="true",nodes="unknown",nranks="4",op="reduce_scatter",run="bench",size_bytes="4096"'
    assert abs(v[f"nccl_tests_bus_bandwidth_bytes_per_second{{{rs}}}"] - 0.15e9) < 1
    assert f"nccl_tests_wrong{{{rs}}}" not in v  # N/A
    avg = 'host="unknown",nodes="unknown",nranks="4",op="reduce_scatter",run="bench"'
    assert abs(v[f"nccl_tests_avg_bus_bandwidth_bytes_per_second{{{avg}}}"] - 0.0867e9) < 1


def test_reads_only_new_bytes_and_keeps_a_partial_line(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.log"
    log.write_text(WARN)
    source = make(tmp_path)
    assert warnings(source.collect_sync(1)) == 1
    assert warnings(source.collect_sync(2)) == 1  # nothing new: nothing re-counted
    append(log, WARN + WARN[:30])  # one full line, one half-written line
    assert warnings(source.collect_sync(3)) == 2
    append(log, WARN[30:])
    assert warnings(source.collect_sync(4)) == 3  # the completed line counts exactly once


def test_rotation_by_rename_and_new_file(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.log"
    log.write_text(WARN)
    source = make(tmp_path, str(tmp_path / "logs" / "a.log*"))
    assert warnings(source.collect_sync(1)) == 1
    append(log, WARN)  # written just before rotation, not yet read
    log.rename(tmp_path / "logs" / "a.log.1")
    log.write_text(WARN_TS)  # new inode at the old path
    assert warnings(source.collect_sync(2)) == 3  # old file finished at its offset, new one from 0
    assert warnings(source.collect_sync(3)) == 3


def test_rotation_new_inode_same_path(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.log"
    log.write_text(WARN * 3)
    source = make(tmp_path)
    assert warnings(source.collect_sync(1)) == 3
    log.unlink()
    log.write_text(WARN)  # shorter file, new inode
    assert warnings(source.collect_sync(2)) == 4


def test_truncation_starts_over(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.log"
    log.write_text(WARN * 3)
    source = make(tmp_path)
    inode = os.stat(log).st_ino
    assert warnings(source.collect_sync(1)) == 3
    with log.open("r+") as handle:  # copytruncate: same inode, size 0
        handle.truncate(0)
    assert os.stat(log).st_ino == inode
    append(log, WARN)
    assert warnings(source.collect_sync(2)) == 4


def test_restart_from_persisted_offsets_no_double_count_no_skip(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.log"
    log.write_text(WARN * 2 + WATCHDOG_LOG + NCCL_TESTS_OUT.split("# Avg")[0] + WARN[:25])
    first = make(tmp_path)
    assert warnings(first.collect_sync(1)) == 2
    asyncio.run(first.close())
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["files"][0]["path"] == str(log) and state["files"][0]["inode"] == os.stat(log).st_ino
    assert not list(tmp_path.glob("*.tmp"))  # atomic write leaves no temp file
    append(log, WARN[25:] + "# Avg bus bandwidth    : 0.0867\n")  # finishes the partial line
    second = make(tmp_path)  # a new process: state comes from the file only
    v = values(second.collect_sync(2))
    assert v['nccl_warnings_total{source="misc/socket.cc"}'] == 3
    assert v['nccl_timeouts_total{op="ALLGATHER",rank="2"}'] == 1  # counter continued, not reset or doubled
    avg = 'nccl_tests_avg_bus_bandwidth_bytes_per_second{host="unknown",nodes="unknown",nranks="4",op="reduce_scatter",run="a@'
    assert any(k.startswith(avg) for k in v)  # op and run context survived


def test_missing_glob_is_an_empty_healthy_scrape(tmp_path: Path) -> None:
    source = make(tmp_path, str(tmp_path / "nowhere" / "*.log"), str(tmp_path / "none*.prom"))
    result = asyncio.run(_collect(source))
    assert result.health.up and len(result.batch) == 0


async def _collect(source: NcclLogSource) -> ScrapeResult:
    return await source.collect(asyncio.get_running_loop().time() + 5)


def test_unreadable_file_fails_naming_the_path_and_others_still_count(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    good, bad = tmp_path / "logs" / "a.log", tmp_path / "logs" / "b.log"
    good.write_text(WARN)
    bad.write_text(WARN)

    def opener(path: Path) -> IO[bytes]:
        if path.name == "b.log":
            raise PermissionError(13, "Permission denied", str(path))
        return path.open("rb")

    source = NcclLogSource([str(tmp_path / "logs" / "*.log")], tmp_path / "state.json", ManualClock(), opener=opener)
    result = source.collect_sync(1)
    assert not result.health.up and result.health.reason == "read"
    assert str(bad) in result.health.error and "Permission denied" in result.health.error
    source.follower.opener = lambda path: path.open("rb")
    assert warnings(source.collect_sync(2)) == 2  # a.log kept, b.log read from 0 once readable


def test_malformed_prom_fails_with_parse_reason(tmp_path: Path) -> None:
    prom = tmp_path / "x.prom"
    prom.write_text("nccl_bus_bandwidth_gbs{gpu=\"GPU0\"} not-a-number\n")
    result = make(tmp_path, str(prom)).collect_sync(1)
    assert not result.health.up and result.health.reason == "parse" and str(prom) in result.health.error


def test_corrupt_state_file_starts_fresh(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_text(WARN)
    result = make(tmp_path).collect_sync(1)
    assert result.health.up and warnings(result) == 1
    assert json.loads((tmp_path / "state.json").read_text())["version"] == 1


def test_unwritable_state_is_reported(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_text(WARN)
    source = NcclLogSource([str(tmp_path / "logs" / "*.log")], tmp_path / "no-dir" / "state.json", ManualClock())
    result = source.collect_sync(1)
    assert not result.health.up and result.health.reason == "state" and "no-dir" in result.health.error


def test_long_line_without_newline_is_consumed_in_chunks(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.log"
    log.write_text("x" * 100 + "\n" + WARN)
    source = NcclLogSource([str(log)], tmp_path / "state.json", ManualClock(), max_bytes_per_file=64)
    for step in range(5):
        source.collect_sync(step)
    v = values(source.collect_sync(9))
    assert v['nccl_warnings_total{source="misc/socket.cc"}'] == 1


def series(result: ScrapeResult, canonical: str) -> list[tuple[int, float]]:
    return [(s.ts_ms, s.value) for s in result.batch.samples() if s.series.canonical() == canonical]


def timeouts(op: str, rank: int) -> str:
    return f'nccl_timeouts_total{{op="{op}",rank="{rank}"}}'


def test_a_new_counter_gets_a_zero_just_before_its_first_sample_not_after_a_restart(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "train.log"
    log.write_text(timeout_line(1, 100))
    source = make(tmp_path)
    first = source.collect_sync(10_000)
    assert series(first, timeouts("ALLREDUCE", 1)) == [(9_999, 0.0), (10_000, 1.0)]
    assert series(first, 'nccl_log_lines_total{result="parsed"}') == [(9_999, 0.0), (10_000, 1.0)]
    assert series(source.collect_sync(20_000), timeouts("ALLREDUCE", 1)) == [(20_000, 1.0)]  # only at its birth
    append(log, timeout_line(1, 101) + timeout_line(2, 101))
    third = source.collect_sync(30_000)
    assert series(third, timeouts("ALLREDUCE", 1)) == [(30_000, 2.0)]
    assert series(third, timeouts("ALLREDUCE", 2)) == [(29_999, 0.0), (30_000, 1.0)]
    asyncio.run(source.close())
    restarted = make(tmp_path)  # counters come back from the state file: no new zero
    fourth = restarted.collect_sync(40_000)
    assert [s for s in fourth.batch.samples() if s.ts_ms != 40_000] == []
    assert series(fourth, timeouts("ALLREDUCE", 2)) == [(40_000, 1.0)]
    append(log, timeout_line(3, 102, op="BROADCAST"))
    assert series(restarted.collect_sync(50_000), timeouts("BROADCAST", 3)) == [(49_999, 0.0), (50_000, 1.0)]


def events(result: ScrapeResult) -> dict[str, float]:
    return {k: x for k, x in values(result).items() if k.startswith("nccl_timeout_event_timestamp_seconds{")}


def test_every_timeout_is_an_event_with_its_details_and_lagging_ranks(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "job.log"
    log.write_text(DESYNC_LOG)
    source = make(tmp_path)
    name = "nccl_timeout_event_timestamp_seconds"
    assert events(source.collect_sync(60_000)) == {
        f'{name}{{lagging_ranks="2-3",op="ALLREDUCE",ran_for_ms="60321",rank="0",seq="12",timeout_ms="60000"}}': 60.0,
        f'{name}{{lagging_ranks="6",logged="03-11 10:02:03",op="ALLREDUCE",ran_for_ms="600044",rank="4",seq="41208",'
        'timeout_ms="600000"}': 60.0,
        f'{name}{{logged="03-11 10:02:03",op="ALLREDUCE",ran_for_ms="600051",rank="5",seq="41208",timeout_ms="600000"}}': 60.0,
    }
    # A report that arrives in a later read still finds its timeout; the event keeps its first-seen time.
    append(log, timeout_line(7, 9, op="ALLGATHER"))
    later = events(source.collect_sync(120_000))
    assert later[f'{name}{{logged="01-05 09:20:11",op="ALLGATHER",ran_for_ms="600037",rank="7",seq="9",timeout_ms="600000"}}'] == 120.0
    append(log, "\t - [7] Timeout at collective: ALLGATHER, #9\n"
                "\t - To our best knowledge, ranks [1, 11] are the lagging ranks that caused this timeout. They never joined\n"
                "\t - [3] Timeout at collective: ALLGATHER, #9\n\t - To our best knowledge, ranks [4] are the lagging ranks\n")
    asyncio.run(source.close())
    after = events(make(tmp_path).collect_sync(180_000))  # across a restart, too
    assert len(after) == 4
    assert after[f'{name}{{lagging_ranks="1,11",logged="01-05 09:20:11",op="ALLGATHER",ran_for_ms="600037",rank="7",seq="9",'
                 'timeout_ms="600000"}'] == 120.0  # rank 3 timed out nowhere in this file: its report is dropped


def test_timeout_events_are_bounded_but_each_is_emitted_at_least_once(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "storm.log").write_text("".join(timeout_line(r, 5) for r in range(MAX_TIMEOUT_EVENTS + 5)))
    source = make(tmp_path)
    assert len(events(source.collect_sync(1_000))) == MAX_TIMEOUT_EVENTS + 5
    kept = events(source.collect_sync(2_000))
    assert len(kept) == MAX_TIMEOUT_EVENTS and not any('rank="0"' in k for k in kept)  # the oldest let go
    assert values(source.collect_sync(3_000))[timeouts("ALLREDUCE", 0)] == 1  # the counter stays


def busbw(result: ScrapeResult, size: int = 1 << 30) -> dict[str, float]:
    """nccl-tests out-of-place busbw at ``size`` by the run's labels (everything but op/size/inplace)."""
    out = {}
    for sample in result.batch.samples():
        key = sample.series
        if key.name == "nccl_tests_bus_bandwidth_bytes_per_second" and key.get("size_bytes") == str(size) \
                and key.get("inplace") == "false":
            out[",".join(f"{k}={key.get(k)}" for k in ("run", "host", "nodes", "nranks"))] = round(sample.value / 1e9, 1)
    return out


def test_nccl_tests_runs_are_told_apart_by_run_host_nodes_and_nranks(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "all_reduce_perf_1node.txt").write_text(nccl_tests_output(["node-a"], 8, 160.4))
    (tmp_path / "bench" / "all_reduce_perf_2node.txt").write_text(
        nccl_tests_output(["node-a", "node-b"], 8, 127.3, new_format=False))
    sweep = tmp_path / "bench" / "sweep.log"
    first_run = nccl_tests_output(["node-c"], 4, 150.0)
    sweep.write_text(first_run)
    source = make(tmp_path, str(tmp_path / "bench" / "*"))
    result = source.collect_sync(1_000)
    assert busbw(result) == {
        "run=all_reduce_perf_1node,host=node-a,nodes=1,nranks=8": 160.4,
        "run=all_reduce_perf_2node,host=node-a,nodes=2,nranks=16": 127.3,
        "run=sweep,host=node-c,nodes=1,nranks=4": 150.0,
    }
    avg = 'nccl_tests_avg_bus_bandwidth_bytes_per_second{host="node-a",nodes="2",nranks="16",op="all_reduce",run="all_reduce_perf_2node"}'
    assert abs(values(result)[avg] - 63.65e9) < 1
    asyncio.run(source.close())
    append(sweep, nccl_tests_output(["node-c", "node-d"], 4, 120.0))  # a second run appended, read after a restart
    again = busbw(make(tmp_path, str(tmp_path / "bench" / "*")).collect_sync(2_000))
    assert again["run=sweep,host=node-c,nodes=1,nranks=4"] == 150.0
    assert again[f"run=sweep@{len(first_run.encode())},host=node-c,nodes=2,nranks=8"] == 120.0
    assert len(again) == 4


def test_a_state_file_from_before_events_and_runs_still_loads(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.log"
    log.write_text(timeout_line(1, 100) + NCCL_TESTS_OUT.split("# Avg")[0])
    first = make(tmp_path)
    first.collect_sync(1_000)
    asyncio.run(first.close())
    state = json.loads((tmp_path / "state.json").read_text())
    del state["aggregate"]["timeout_events"]
    state["files"] = [{k: v for k, v in f.items() if k in ("path", "inode", "offset", "tests_op")} for f in state["files"]]
    (tmp_path / "state.json").write_text(json.dumps(state))
    append(log, "# Avg bus bandwidth    : 0.0867\n")
    result = make(tmp_path).collect_sync(2_000)
    assert result.health.up and series(result, timeouts("ALLREDUCE", 1)) == [(2_000, 1.0)]  # restored: no zero
    assert events(result) == {}  # the old state kept no events; nothing is invented
    avg = 'nccl_tests_avg_bus_bandwidth_bytes_per_second{host="unknown",nodes="unknown",nranks="unknown",op="reduce_scatter",run="a@'
    assert any(k.startswith(avg) for k in values(result))  # a run begun before the upgrade: labelled from here on
