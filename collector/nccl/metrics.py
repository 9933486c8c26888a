"""Fold parsed NCCL events into series; the whole state round-trips through JSON.

===========================================================  =======  ==========================================
series                                                       type     value / source
===========================================================  =======  ==========================================
``nccl_info{version}``                                       gauge    1 per NCCL version seen ("NCCL version ...")
``nccl_comm_ranks{comm}``                                    gauge    nranks ("Init START/COMPLETE", "nRanks")
``nccl_comm_nodes{comm}``                                    gauge    nNodes ("comm .. nRanks N nNodes K ..")
``nccl_transport_channels{comm,transport}``                  gauge    distinct (channel, src, dst) links per
                                                                      transport (P2P, SHM, NET/IB, NET/Socket,
                                                                      NET/<plugin>, CollNet); NVLS: "nvls channels"
``nccl_init_seconds{comm}``                                  gauge    "Init timings .. total S", max over ranks
``nccl_collective_bus_bandwidth_bytes_per_second``           gauge    Inspector busbw (GB/s x 1e9), latest
``{op,size_bytes,rank}``
``nccl_collective_exec_seconds{op,size_bytes,rank}``         gauge    Inspector exec time (us / 1e6), latest
``nccl_timeouts_total{op,rank}``                             counter  PyTorch watchdog timeouts
``nccl_last_timeout_seqnum{rank}``                           gauge    SeqNum of the latest timeout
``nccl_timeout_setting_seconds{rank}``                       gauge    Timeout(ms) / 1000 of the latest timeout
``nccl_warnings_total{source}``                              counter  NCCL WARN lines by source file / subsystem
``nccl_tests_bus_bandwidth_bytes_per_second``                gauge    nccl-tests busbw (GB/s x 1e9), latest
``{op,size_bytes,inplace}``
``nccl_tests_time_seconds{op,size_bytes,inplace}``           gauge    nccl-tests time (us / 1e6), latest
``nccl_tests_wrong{op,size_bytes,inplace}``                  gauge    nccl-tests #wrong (absent when N/A)
``nccl_tests_avg_bus_bandwidth_bytes_per_second{op}``        gauge    "# Avg bus bandwidth : X" x 1e9
``nccl_log_lines_total{result}``                             counter  non-blank lines read: parsed | ignored
``nccl_series_dropped_total``                                counter  new series refused over ``max_series``
===========================================================  =======  ==========================================

``comm`` is the communicator's ``commId`` (shared by all its ranks) when the log prints one,
else its per-process pointer. Transport lines and the channel summary name no communicator:
they are given the last communicator initialised by the same thread, else the same process
(``host:pid``), else ``unknown``. ``inplace`` is ``"false"`` / ``"true"``; nccl-tests ``op``
comes from the file's "Collective test starting" line, else the file name, else ``unknown``.
Counters never reset: the state (with the follower's offsets) is persisted by the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collector.nccl.debug_lines import (
    ChannelSummary,
    CommInit,
    CommTopology,
    InitTiming,
    NcclVersion,
    NcclWarning,
    Origin,
    TransportChannel,
)
from collector.nccl.inspector import InspectorPerf
from collector.nccl.lines import Event
from collector.nccl.nccl_tests import PerfAverage, PerfRow, PerfStart
from collector.nccl.watchdog import WatchdogTimeout
from store.types import Sample, SeriesKey

_CONTEXT_CAP = 4096  # remembered pointer/thread/process -> comm attributions


@dataclass(slots=True)
class FileContext:
    """Per-file parsing context that must survive restarts (kept with the file's offset)."""

    tests_op: str = ""


def _remember(table: dict[str, str], key: str, value: str) -> None:
    table.pop(key, None)
    table[key] = value
    while len(table) > _CONTEXT_CAP:
        del table[next(iter(table))]


def _key_json(key: SeriesKey, value: float) -> list[Any]:
    return [key.name, [list(pair) for pair in key.labels], value]


class NcclAggregator:
    def __init__(self, max_series: int = 20_000) -> None:
        self.max_series = max_series
        self.gauges: dict[SeriesKey, float] = {}
        self.counters: dict[SeriesKey, float] = {}
        self.links: dict[str, dict[str, set[str]]] = {}  # comm -> transport -> {"ch:src:dst"}
        self.nvls: dict[str, int] = {}
        self.ptr_comm: dict[str, str] = {}  # "host:pid:ptr" -> comm
        self.thread_comm: dict[str, str] = {}  # "host:pid:tid" -> comm
        self.proc_comm: dict[str, str] = {}  # "host:pid" -> comm
        self.rank_comm: dict[str, str] = {}  # "host:pid:rank" -> comm

    # -- state changes -------------------------------------------------------------------
    def _room(self, key: SeriesKey, table: dict[SeriesKey, float]) -> bool:
        if key in table or len(self.gauges) + len(self.counters) < self.max_series:
            return True
        dropped = SeriesKey("nccl_series_dropped_total")
        self.counters[dropped] = self.counters.get(dropped, 0.0) + 1
        return False

    def set(self, name: str, value: float, **labels: str) -> None:
        key = SeriesKey.of(name, **labels)
        if self._room(key, self.gauges):
            self.gauges[key] = value

    def inc(self, name: str, by: float = 1.0, **labels: str) -> None:
        key = SeriesKey.of(name, **labels)
        if self._room(key, self.counters):
            self.counters[key] = self.counters.get(key, 0.0) + by

    def count_lines(self, parsed: int, ignored: int) -> None:
        if parsed:
            self.inc("nccl_log_lines_total", parsed, result="parsed")
        if ignored:
            self.inc("nccl_log_lines_total", ignored, result="ignored")

    def _comm_of(self, origin: Origin) -> str:
        return self.thread_comm.get(origin.thread) or self.proc_comm.get(origin.process) or "unknown"

    def _bind(self, origin: Origin, comm: str, rank: int | None = None) -> None:
        _remember(self.thread_comm, origin.thread, comm)
        _remember(self.proc_comm, origin.process, comm)
        if rank is not None:
            _remember(self.rank_comm, f"{origin.process}:{rank}", comm)

    def apply(self, event: Event, ctx: FileContext) -> None:
        match event:
            case NcclVersion(version=version):
                self.set("nccl_info", 1.0, version=version)
            case CommInit(origin=o, comm_ptr=ptr, rank=rank, nranks=nranks, comm_id=comm_id):
                comm = comm_id or self.ptr_comm.get(f"{o.process}:{ptr}") or ptr
                _remember(self.ptr_comm, f"{o.process}:{ptr}", comm)
                self._bind(o, comm, rank)
                self.set("nccl_comm_ranks", float(nranks), comm=comm)
            case CommTopology(origin=o, comm_ptr=ptr, rank=rank, nranks=nranks, nnodes=nnodes):
                comm = self.ptr_comm.get(f"{o.process}:{ptr}") or ptr
                self._bind(o, comm, rank)
                self.set("nccl_comm_ranks", float(nranks), comm=comm)
                self.set("nccl_comm_nodes", float(nnodes), comm=comm)
            case TransportChannel(origin=o, channel=ch, src=src, dst=dst, transport=transport):
                comm = self._comm_of(o)
                if comm in self.links or len(self.links) < _CONTEXT_CAP:
                    self.links.setdefault(comm, {}).setdefault(transport, set()).add(f"{ch}:{src}:{dst}")
            case ChannelSummary(origin=o, nvls=nvls):
                if nvls > 0:
                    comm = self._comm_of(o)
                    self.nvls[comm] = max(nvls, self.nvls.get(comm, 0))
            case InitTiming(origin=o, rank=rank, total_seconds=total):
                comm = self.rank_comm.get(f"{o.process}:{rank}") or self._comm_of(o)
                old = self.gauges.get(SeriesKey.of("nccl_init_seconds", comm=comm), 0.0)
                self.set("nccl_init_seconds", max(old, total), comm=comm)
            case NcclWarning(source=source):
                self.inc("nccl_warnings_total", source=source)
            case WatchdogTimeout(rank=rank, seq=seq, op=op, timeout_ms=timeout_ms):
                self.inc("nccl_timeouts_total", op=op, rank=str(rank))
                self.set("nccl_last_timeout_seqnum", float(seq), rank=str(rank))
                self.set("nccl_timeout_setting_seconds", timeout_ms / 1000, rank=str(rank))
            case InspectorPerf(op=op, size_bytes=size, rank=rank, exec_seconds=exec_s) as perf:
                labels = {"op": op, "size_bytes": str(size), "rank": str(rank)}
                self.set("nccl_collective_exec_seconds", exec_s, **labels)
                if perf.bus_bandwidth_bytes_per_second is not None:
                    self.set("nccl_collective_bus_bandwidth_bytes_per_second",
                             perf.bus_bandwidth_bytes_per_second, **labels)
            case PerfStart(op=op, concluded=concluded):
                if not concluded or not ctx.tests_op:
                    ctx.tests_op = op
            case PerfRow(size_bytes=size) as row:
                op = ctx.tests_op or "unknown"
                for inplace, res in (("false", row.out_of_place), ("true", row.in_place)):
                    labels = {"op": op, "size_bytes": str(size), "inplace": inplace}
                    self.set("nccl_tests_bus_bandwidth_bytes_per_second", res.bus_bandwidth_bytes_per_second, **labels)
                    self.set("nccl_tests_time_seconds", res.time_seconds, **labels)
                    if res.wrong is not None:
                        self.set("nccl_tests_wrong", float(res.wrong), **labels)
            case PerfAverage(bus_bandwidth_bytes_per_second=bw):
                self.set("nccl_tests_avg_bus_bandwidth_bytes_per_second", bw, op=ctx.tests_op or "unknown")

    # -- output --------------------------------------------------------------------------
    def samples(self, ts_ms: int) -> list[Sample]:
        out = [Sample(k, ts_ms, v) for k, v in self.gauges.items()]
        out += [Sample(k, ts_ms, v) for k, v in self.counters.items()]
        channels: dict[SeriesKey, float] = {}
        for comm, per_transport in self.links.items():
            for transport, links in per_transport.items():
                channels[SeriesKey.of("nccl_transport_channels", comm=comm, transport=transport)] = float(len(links))
        for comm, nvls in self.nvls.items():
            channels[SeriesKey.of("nccl_transport_channels", comm=comm, transport="NVLS")] = float(nvls)
        out += [Sample(k, ts_ms, v) for k, v in channels.items()]
        return out

    # -- persistence ---------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "gauges": [_key_json(k, v) for k, v in self.gauges.items()],
            "counters": [_key_json(k, v) for k, v in self.counters.items()],
            "links": {c: {t: sorted(s) for t, s in per.items()} for c, per in self.links.items()},
            "nvls": dict(self.nvls),
            "ptr_comm": dict(self.ptr_comm),
            "thread_comm": dict(self.thread_comm),
            "proc_comm": dict(self.proc_comm),
            "rank_comm": dict(self.rank_comm),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], max_series: int = 20_000) -> NcclAggregator:
        """Raises ``KeyError``/``TypeError``/``ValueError`` on a malformed document."""
        agg = cls(max_series)
        for field, table in (("gauges", agg.gauges), ("counters", agg.counters)):
            for name, labels, value in data[field]:
                table[SeriesKey(str(name), tuple((str(k), str(v)) for k, v in labels))] = float(value)
        agg.links = {str(c): {str(t): {str(x) for x in s} for t, s in per.items()} for c, per in data["links"].items()}
        agg.nvls = {str(c): int(n) for c, n in data["nvls"].items()}
        for field in ("ptr_comm", "thread_comm", "proc_comm", "rank_comm"):
            getattr(agg, field).update({str(k): str(v) for k, v in data[field].items()})
        return agg
