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
``nccl_timeout_event_timestamp_seconds``                     gauge    one series per timeout (see below): the
``{op,rank,seq,timeout_ms[,ran_for_ms][,pg][,logged]``                Unix time the collector read it
``[,lagging_ranks]}``
``nccl_last_timeout_seqnum{rank}``                           gauge    SeqNum of the latest timeout
``nccl_timeout_setting_seconds{rank}``                       gauge    Timeout(ms) / 1000 of the latest timeout
``nccl_warnings_total{source}``                              counter  NCCL WARN lines by source file / subsystem
``nccl_tests_bus_bandwidth_bytes_per_second``                gauge    nccl-tests busbw (GB/s x 1e9), latest
``{op,size_bytes,inplace,run,host,nranks,nodes}``
``nccl_tests_time_seconds{..same..}``                        gauge    nccl-tests time (us / 1e6), latest
``nccl_tests_wrong{..same..}``                               gauge    nccl-tests #wrong (absent when N/A)
``nccl_tests_avg_bus_bandwidth_bytes_per_second``            gauge    "# Avg bus bandwidth : X" x 1e9
``{op,run,host,nranks,nodes}``
``nccl_log_lines_total{result}``                             counter  non-blank lines read: parsed | ignored
``nccl_series_dropped_total``                                counter  new series refused over ``max_series``
===========================================================  =======  ==========================================

``comm`` is the communicator's ``commId`` (shared by all its ranks) when the log prints one,
else its per-process pointer. Transport lines and the channel summary name no communicator:
they are given the last communicator initialised by the same thread, else the same process
(``host:pid``), else ``unknown``. ``inplace`` is ``"false"`` / ``"true"``; nccl-tests ``op``
comes from the file's "Collective test starting" line, else the file name, else ``unknown``.

nccl-tests runs: a run starts at its first header line (``nccl-tests version``, ``Collective
test starting``, ``nThread``) after the previous run's rows, or at its first row. ``run`` is the
file's stem, with ``@<byte offset>`` when the run does not start at the top of the file (several
runs appended to one file); ``host`` is the host of the first ``Rank`` line, ``nodes`` the number
of distinct hosts among them, ``nranks`` the highest rank + 1 (``nThread x nGpus`` without
``Rank`` lines); ``unknown`` when the output does not say.

Timeout events: every watchdog timeout is one ``nccl_timeout_event_timestamp_seconds`` series
(``rank`` is ``unknown`` when the line names none; ``logged`` is the glog ``MM-DD HH:MM:SS``;
``lagging_ranks`` the ranks a ``TORCH_NCCL_DESYNC_DEBUG`` report that follows it in the same
file blames, compact as ``1-3,7``). It is re-emitted every collect while it is among the
newest :data:`MAX_TIMEOUT_EVENTS` (so cardinality stays bounded), and always at least once.

Counters never reset: the state (with the follower's offsets) is persisted by the source. A
counter series created in this process's life gets a 0 sample 1 ms before its first sample (as
Prometheus ingests created timestamps), so ``increase()`` counts its first increment; a counter
restored from the persisted state does not.
"""

from __future__ import annotations

from typing import Any

from collector.nccl.debug_lines import (
    ChannelSummary,
    CommInit,
    CommTopology,
    EnvSetting,
    InitTiming,
    NcclVersion,
    NcclWarning,
    Origin,
    TransportChannel,
)
from collector.nccl.engine_lines import EplbStep, TorchNcclEnvironment
from collector.nccl.inspector import InspectorPerf
from collector.nccl.lines import Event
from collector.nccl.nccl_tests import PerfAverage, PerfHeader, PerfRank, PerfRow, PerfStart
from collector.nccl.records import FileContext, TestsRun, TimeoutRecord
from collector.nccl.software import SoftwareTable, plain_nccl_version
from collector.nccl.watchdog import DesyncHeader, LaggingRanks, WatchdogTimeout
from store.types import Sample, SeriesKey

_CONTEXT_CAP = 4096  # remembered pointer/thread/process -> comm attributions; hosts / lagging ranks kept
MAX_TIMEOUT_EVENTS = 100  # timeout events re-emitted every collect (the newest)
_REPORT_REACH = 64 * 1024  # a desync report line attaches to a timeout at most this many bytes above it


def _remember(table: dict[str, str], key: str, value: str) -> None:
    table.pop(key, None)
    table[key] = value
    while len(table) > _CONTEXT_CAP:
        del table[next(iter(table))]


def _key_json(key: SeriesKey, value: float) -> list[Any]:
    return [key.name, [list(pair) for pair in key.labels], value]


class NcclAggregator:
    def __init__(self, max_series: int = 20_000, host: str = "", watched: tuple[str, ...] = ()) -> None:
        self.max_series = max_series
        self.host = host  # this collector's host: lines that name none are from here
        self.software = SoftwareTable(watched)
        self.gauges: dict[SeriesKey, float] = {}
        self.counters: dict[SeriesKey, float] = {}
        self.links: dict[str, dict[str, set[str]]] = {}  # comm -> transport -> {"ch:src:dst"}
        self.nvls: dict[str, int] = {}
        self.ptr_comm: dict[str, str] = {}  # "host:pid:ptr" -> comm
        self.thread_comm: dict[str, str] = {}  # "host:pid:tid" -> comm
        self.proc_comm: dict[str, str] = {}  # "host:pid" -> comm
        self.rank_comm: dict[str, str] = {}  # "host:pid:rank" -> comm
        self.timeout_events: dict[str, TimeoutRecord] = {}  # event id -> record, oldest first
        self.now_ms = 0  # the collect's time, set by the source before it applies events
        self._fresh: set[SeriesKey] = set()  # counters born in this process, not yet emitted

    # -- state changes -------------------------------------------------------------------
    def _room(self, key: SeriesKey, table: dict[SeriesKey, float]) -> bool:
        if key in table or len(self.gauges) + len(self.counters) < self.max_series:
            return True
        self._count(SeriesKey("nccl_series_dropped_total"), 1.0)
        return False

    def _count(self, key: SeriesKey, by: float) -> None:
        if key not in self.counters:
            self._fresh.add(key)
        self.counters[key] = self.counters.get(key, 0.0) + by

    def set(self, name: str, value: float, **labels: str) -> None:
        key = SeriesKey.of(name, **labels)
        if self._room(key, self.gauges):
            self.gauges[key] = value

    def inc(self, name: str, by: float = 1.0, **labels: str) -> None:
        key = SeriesKey.of(name, **labels)
        if self._room(key, self.counters):
            self._count(key, by)

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
        origin = getattr(event, "origin", None)
        if origin is not None:
            ctx.host = origin.host
        host = ctx.host or self.host or "unknown"
        match event:
            case NcclVersion(version=version):
                self.set("nccl_info", 1.0, version=version)
                self.software.version(host, "nccl", plain_nccl_version(version))
            case EnvSetting(origin=o, name=name, value=value):
                self.software.setting(o.host, name, value)
            case TorchNcclEnvironment(nccl_version=version, settings=settings):
                self.software.torch_settings(host, settings)
                if version:
                    self.software.version(host, "nccl", plain_nccl_version(version))
            case EplbStep(model=model, balancedness=balancedness):
                self.inc("moe_balancedness_sum", balancedness, model=model)
                self.inc("moe_balancedness_count", 1.0, model=model)
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
            case WatchdogTimeout(seq=seq, op=op, timeout_ms=timeout_ms) as timeout:
                who = "unknown" if timeout.rank is None else str(timeout.rank)
                self.inc("nccl_timeouts_total", op=op, rank=who)
                self.set("nccl_last_timeout_seqnum", float(seq), rank=who)
                self.set("nccl_timeout_setting_seconds", timeout_ms / 1000, rank=who)
                self._timeout_event(timeout, who, ctx)
            case DesyncHeader(rank=rank):
                ctx.desync_rank = str(rank)
            case LaggingRanks(ranks=ranks, reporter=reporter):
                self._lagging(ranks, "" if reporter is None else str(reporter), ctx)
            case InspectorPerf(op=op, size_bytes=size, rank=rank, exec_seconds=exec_s) as perf:
                labels = {"op": op, "size_bytes": str(size), "rank": str(rank)}
                self.set("nccl_collective_exec_seconds", exec_s, **labels)
                if perf.bus_bandwidth_bytes_per_second is not None:
                    self.set("nccl_collective_bus_bandwidth_bytes_per_second",
                             perf.bus_bandwidth_bytes_per_second, **labels)
            case PerfStart(op=op, concluded=concluded):
                if not concluded:
                    self._tests_run(ctx, header=True)
                if not concluded or not ctx.tests_op:
                    ctx.tests_op = op
            case PerfHeader(nthread=nthread, ngpus=ngpus):
                run = self._tests_run(ctx, header=True)
                if nthread is not None and ngpus is not None:
                    run.header_ranks = nthread * ngpus
            case PerfRank(rank=rank, host=host):
                run = self._tests_run(ctx, header=True)
                run.ranks = max(run.ranks, rank + 1)
                if host not in run.hosts and len(run.hosts) < _CONTEXT_CAP:
                    run.hosts.append(host)
            case PerfRow(size_bytes=size) as row:
                run = self._tests_run(ctx, header=False)
                run.rows = True
                op = ctx.tests_op or "unknown"
                for inplace, res in (("false", row.out_of_place), ("true", row.in_place)):
                    labels = {"op": op, "size_bytes": str(size), "inplace": inplace, **run.labels()}
                    self.set("nccl_tests_bus_bandwidth_bytes_per_second", res.bus_bandwidth_bytes_per_second, **labels)
                    self.set("nccl_tests_time_seconds", res.time_seconds, **labels)
                    if res.wrong is not None:
                        self.set("nccl_tests_wrong", float(res.wrong), **labels)
            case PerfAverage(bus_bandwidth_bytes_per_second=bw):
                run = self._tests_run(ctx, header=False)
                self.set("nccl_tests_avg_bus_bandwidth_bytes_per_second", bw, op=ctx.tests_op or "unknown", **run.labels())

    @staticmethod
    def _tests_run(ctx: FileContext, *, header: bool) -> TestsRun:
        """The file's current nccl-tests run; a header line after rows (or a first line) starts one."""
        run = ctx.tests_run
        if run is None or (header and run.rows):
            run = ctx.tests_run = TestsRun(ctx.run_id())
        return run

    def _timeout_event(self, timeout: WatchdogTimeout, rank: str, ctx: FileContext) -> None:
        record = TimeoutRecord(timeout.op, rank, timeout.seq, timeout.timeout_ms, timeout.ran_for_ms, timeout.pg,
                               timeout.logged, self.now_ms)
        self.timeout_events.setdefault(record.id, record)  # the same timeout printed again is one event
        for who in (rank, ""):
            ctx.timeouts.pop(who, None)
            ctx.timeouts[who] = (record.id, ctx.offset)
        while len(ctx.timeouts) > _CONTEXT_CAP:
            del ctx.timeouts[next(iter(ctx.timeouts))]
        ctx.desync_rank = ""

    def _lagging(self, ranks: tuple[int, ...], reporter: str, ctx: FileContext) -> None:
        """Attach a desync report's ranks to the timeout it follows (of the rank it is about)."""
        target = ctx.timeouts.get(reporter or ctx.desync_rank or "")
        if target is None or not 0 <= ctx.offset - target[1] <= _REPORT_REACH:
            return
        record = self.timeout_events.get(target[0])
        if record is not None and len(record.lagging) < _CONTEXT_CAP:
            record.lagging.update(ranks)

    # -- output --------------------------------------------------------------------------
    def samples(self, ts_ms: int) -> list[Sample]:
        """Every series at ``ts_ms``; a counter born since the last call also gets a 0 at
        ``ts_ms - 1``, and every timeout event is emitted before the oldest are let go."""
        out = [Sample(k, ts_ms, v) for k, v in self.gauges.items()]
        for k, v in self.counters.items():
            if k in self._fresh:
                out.append(Sample(k, ts_ms - 1, 0.0))
            out.append(Sample(k, ts_ms, v))
        self._fresh.clear()
        for record in self.timeout_events.values():
            if not record.seen_ms:
                record.seen_ms = ts_ms
            out.append(Sample(record.key(), ts_ms, record.seen_ms / 1000))
        while len(self.timeout_events) > MAX_TIMEOUT_EVENTS:
            del self.timeout_events[next(iter(self.timeout_events))]
        channels: dict[SeriesKey, float] = {}
        for comm, per_transport in self.links.items():
            for transport, links in per_transport.items():
                channels[SeriesKey.of("nccl_transport_channels", comm=comm, transport=transport)] = float(len(links))
        for comm, nvls in self.nvls.items():
            channels[SeriesKey.of("nccl_transport_channels", comm=comm, transport="NVLS")] = float(nvls)
        out += [Sample(k, ts_ms, v) for k, v in channels.items()]
        return out + self.software.samples(ts_ms)

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
            "timeout_events": [r.to_json() for r in self.timeout_events.values()],
            "software": self.software.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], max_series: int = 20_000, host: str = "",
                  watched: tuple[str, ...] = ()) -> NcclAggregator:
        """Raises ``KeyError``/``TypeError``/``ValueError`` on a malformed document."""
        agg = cls(max_series, host, watched)
        agg.software = SoftwareTable.from_json(data.get("software"), watched)
        for field, table in (("gauges", agg.gauges), ("counters", agg.counters)):
            for name, labels, value in data[field]:
                table[SeriesKey(str(name), tuple((str(k), str(v)) for k, v in labels))] = float(value)
        agg.links = {str(c): {str(t): {str(x) for x in s} for t, s in per.items()} for c, per in data["links"].items()}
        agg.nvls = {str(c): int(n) for c, n in data["nvls"].items()}
        for field in ("ptr_comm", "thread_comm", "proc_comm", "rank_comm"):
            getattr(agg, field).update({str(k): str(v) for k, v in data[field].items()})
        records = (TimeoutRecord.from_json(r) for r in data.get("timeout_events", []))
        agg.timeout_events = {r.id: r for r in records}
        return agg
