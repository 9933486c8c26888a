"""The local GPUs as a :class:`~collector.source.Source`, read through NVML.

Why NVML directly rather than scraping dcgm-exporter: it needs no extra daemon on the node and
answers in milliseconds. The cost is that NVML's failure modes become ours, so the rules are:

* NVML missing (no driver, no ``libnvidia-ml.so``, container without GPUs) is a failed scrape,
  ``failed("nvml_unavailable", ...)``, logged once; ``nvmlInit`` is retried no more often than
  every ``init_retry_s`` seconds (a missing library does not appear on its own every 15 s).
* One bad GPU never hides the others: each GPU is read on its own, and one that is lost or hung
  reports ``gpu_up=0`` while the rest report normally.
* XID errors are events, not gauges: an event set is registered once and drained with a 0 ms
  wait at each collect, so a collect never blocks on it and each event is counted exactly once.

The NVML module is injected (default: ``import pynvml`` at the first collect), so the source
runs in tests and on machines without a driver.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Sequence
from typing import Any

from collector.nvml import metrics as m
from collector.nvml.attribution import (
    EngineTarget,
    ProcessTable,
    PsutilProcessTable,
    attribution_samples,
    listener_trees,
    process_ids,
)
from collector.nvml.gpu import GpuDown, GpuReader, GpuState, error_code, text
from collector.source import Health, ScrapeResult
from store.clock import Clock
from store.types import Sample, SampleBatch, SeriesKey

log = logging.getLogger(__name__)

_XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError in nvml.h
_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: "no event waiting"


def system_versions(nvml: Any) -> dict[str, str]:
    """Driver, CUDA driver (12040 -> "12.4", nvml.h's MAJOR/MINOR macros) and NVML versions; a
    call that fails is left out (old drivers lack some), never the scrape."""
    out: dict[str, str] = {}
    for component, name in (("driver", "nvmlSystemGetDriverVersion"), ("cuda_driver", "nvmlSystemGetCudaDriverVersion"),
                            ("nvml", "nvmlSystemGetNVMLVersion")):
        fn = getattr(nvml, name, None)
        if fn is None:
            continue
        try:
            value = fn()
        except nvml.NVMLError as exc:
            log.debug("%s: %s", name, exc)
            continue
        if isinstance(value, int):
            value = f"{value // 1000}.{(value % 1000) // 10}"
        out[component] = text(value)
    return out


class NvmlGpuSource:
    """All GPUs of this host. ``per_call_timeout_s`` bounds each NVML call; ``init_retry_s`` is
    the least time between two ``nvmlInit`` attempts after one failed."""

    def __init__(
        self,
        clock: Clock,
        host: str,
        *,
        nvml: Any = None,
        per_call_timeout_s: float = 2.0,
        init_retry_s: float = 60.0,
        max_events_per_scrape: int = 256,
        engine_targets: Sequence[EngineTarget] = (),
        processes: ProcessTable | None = None,
    ) -> None:
        self.clock = clock
        self.host = host
        self.per_call_timeout_s = per_call_timeout_s
        self.init_retry_s = init_retry_s
        self.max_events_per_scrape = max_events_per_scrape
        self._nvml = nvml
        self._reader: GpuReader | None = None
        self._gpus: list[GpuState] = []
        self._event_set: Any = None
        self._init_task: asyncio.Future[tuple[Any, int, Any]] | None = None
        self._next_init_at = 0.0
        self._init_error = ""
        self._versions: dict[str, str] = {}  # component -> version, read at nvmlInit (a driver change needs one)
        self._xid_stuck: asyncio.Future[Any] | None = None
        # Local engine targets to match to GPUs by process (see collector.nvml.attribution).
        self.engine_targets = tuple(engine_targets)
        self.processes: ProcessTable = processes or PsutilProcessTable()

    @property
    def gpus(self) -> list[GpuState]:
        return self._gpus

    # -- lifecycle -------------------------------------------------------------------------

    def _init_blocking(self) -> tuple[Any, int, Any]:
        nvml = self._nvml if self._nvml is not None else importlib.import_module("pynvml")
        nvml.nvmlInit()
        count = int(nvml.nvmlDeviceGetCount())
        self._versions = system_versions(nvml)
        event_set: Any = None
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:  # XIDs are then simply not reported
            log.info("NVML event set unavailable, no XID counts: %s", exc)
        return nvml, count, event_set

    async def _ensure_init(self, deadline: float) -> ScrapeResult | None:
        """None once NVML is up; otherwise the failed result for this scrape."""
        if self._init_task is None:
            if self._init_error and self.clock.monotonic() < self._next_init_at:
                return ScrapeResult.failed("nvml_unavailable", self._init_error)
            self._next_init_at = self.clock.monotonic() + self.init_retry_s
            self._init_task = asyncio.ensure_future(asyncio.to_thread(self._init_blocking))
        task = self._init_task
        remaining = deadline - asyncio.get_running_loop().time()
        done, _ = await asyncio.wait({task}, timeout=max(0.0, remaining))
        if not done:  # keep the task: a later collect picks up its outcome
            return ScrapeResult.failed("timeout", f"nvmlInit on {self.host} has not returned yet")
        self._init_task = None
        try:
            nvml, count, event_set = task.result()
        except Exception as exc:  # ImportError, OSError or NVMLError: all mean "no NVML here"
            error = f"NVML unavailable on {self.host}: {type(exc).__name__}: {exc}"
            if not self._init_error:
                log.warning("%s; retrying at most every %gs", error, self.init_retry_s)
            else:
                log.debug("%s", error)
            self._init_error = error
            return ScrapeResult.failed("nvml_unavailable", error)
        if self._init_error:
            log.info("NVML available on %s again", self.host)
            self._init_error = ""
        self._nvml, self._event_set = nvml, event_set
        self._reader = GpuReader(nvml, self.per_call_timeout_s)
        self._gpus = [GpuState(i) for i in range(count)]
        return None

    async def close(self) -> None:
        """Free the event set and shut NVML down, unless a call is still hung in a thread."""
        nvml, reader = self._nvml, self._reader
        self._reader = None
        if reader is None or nvml is None:
            return
        pending = [g.stuck for g in self._gpus] + [self._xid_stuck]
        if any(f is not None and not f.done() for f in pending):
            log.debug("an NVML call is still running; skipping nvmlShutdown")
            return

        event_set, self._event_set = self._event_set, None

        def shutdown() -> None:
            try:
                if event_set is not None:
                    nvml.nvmlEventSetFree(event_set)
                nvml.nvmlShutdown()
            except nvml.NVMLError as exc:
                log.debug("nvmlShutdown: %s", exc)

        self._gpus = []
        await asyncio.wait(
            {asyncio.ensure_future(asyncio.to_thread(shutdown))}, timeout=self.per_call_timeout_s
        )

    # -- collection ------------------------------------------------------------------------

    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult:
        if self._reader is None:
            failure = await self._ensure_init(deadline)
            if failure is not None:
                return failure
        ts_ms = self.clock.now_ms() if ts_ms is None else ts_ms
        await self._poll_xid(deadline)  # first: an XID 79 must be counted even if its GPU is gone
        per_gpu = await asyncio.gather(*(self._collect_gpu(g, deadline, ts_ms) for g in self._gpus))
        samples = [s for group in per_gpu for s in group]
        samples += [Sample(SeriesKey.of(m.SOFTWARE_INFO, host=self.host, component=c, version=v), ts_ms, 1.0)
                    for c, v in self._versions.items()]
        if self.engine_targets:
            samples += await self._attribute(deadline, ts_ms)
        return ScrapeResult(SampleBatch.from_samples(samples), Health.ok())

    async def _attribute(self, deadline: float, ts_ms: int) -> list[Sample]:
        """Which local engine runs on which GPU, by process (a failure here costs only this)."""
        reader = self._reader
        assert reader is not None
        names = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses")
        gpu_pids: dict[tuple[tuple[str, str], ...], frozenset[int]] = {}
        for gpu in self._gpus:
            if not gpu.up or gpu.stuck is not None:
                continue
            try:
                found = await reader.read(gpu, deadline, "processes", names)
            except GpuDown:
                continue
            pids = process_ids(found)
            if pids:
                gpu_pids[gpu.labels(self.host)] = pids
        if not gpu_pids:
            return []
        try:
            trees = await asyncio.to_thread(listener_trees, self.processes, self.engine_targets)
        except Exception:  # psutil trouble must not cost the GPU metrics
            log.debug("reading the process table failed", exc_info=True)
            return []
        return attribution_samples(gpu_pids, trees, ts_ms)

    async def _collect_gpu(self, gpu: GpuState, deadline: float, ts_ms: int) -> list[Sample]:
        reader = self._reader
        assert reader is not None
        samples: list[Sample] = []
        try:
            if gpu.stuck is not None:
                if not gpu.stuck.done():
                    raise GpuDown("busy", "an earlier NVML call has not returned")
                gpu.stuck = None
            samples = await reader.read_gpu(gpu, deadline, ts_ms, self.host)
            if not gpu.xid_tried:
                await self._register_xid(gpu, deadline)
            if not gpu.up:
                log.info("gpu %d (%s) on %s is back", gpu.index, gpu.uuid, self.host)
            gpu.up = True
        except GpuDown as down:
            samples = []
            if gpu.up:
                log.warning(
                    "gpu %d (%s) on %s is down (%s): %s", gpu.index, gpu.uuid, self.host, down.reason, down
                )
            gpu.up = False
        if gpu.uuid and (gpu.xid_registered or gpu.xid_counts):
            labels = gpu.labels(self.host)
            samples.append(Sample(SeriesKey(m.LAST_XID, labels), ts_ms, float(gpu.last_xid)))
            for xid, count in sorted(gpu.xid_counts.items()):
                key = SeriesKey(m.XID_ERRORS, (*labels, ("xid", str(xid))))
                samples.append(Sample(key, ts_ms, float(count)))
        up_key = SeriesKey(m.GPU_UP, (("gpu", str(gpu.index)), ("uuid", gpu.uuid)))
        samples.append(Sample(up_key, ts_ms, 1.0 if gpu.up else 0.0))
        return samples

    # -- XID events ------------------------------------------------------------------------

    async def _register_xid(self, gpu: GpuState, deadline: float) -> None:
        """Register the GPU for XID events once; GPUs or users that cannot simply get none."""
        nvml, reader = self._nvml, self._reader
        assert reader is not None
        gpu.xid_tried = True
        if self._event_set is None:
            return
        xid_bit = int(getattr(nvml, "nvmlEventTypeXidCriticalError", _XID_CRITICAL))
        try:
            supported = await reader.call(gpu, deadline, nvml.nvmlDeviceGetSupportedEventTypes, gpu.handle)
            if not int(supported) & xid_bit:
                log.info("gpu %d on %s does not report XID events", gpu.index, self.host)
                return
            await reader.call(
                gpu, deadline, nvml.nvmlDeviceRegisterEvents, gpu.handle, xid_bit, self._event_set
            )
        except nvml.NVMLError as exc:
            log.info("gpu %d on %s: no XID events (%s)", gpu.index, self.host, exc)
            return
        gpu.xid_registered = True

    def _drain_blocking(self) -> list[tuple[str | None, int | None, int]]:
        """Take every waiting event off the set (0 ms waits) as (uuid, index, xid)."""
        nvml = self._nvml
        wait = getattr(nvml, "nvmlEventSetWait_v2", None) or nvml.nvmlEventSetWait
        xid_bit = int(getattr(nvml, "nvmlEventTypeXidCriticalError", _XID_CRITICAL))
        timeout_code = int(getattr(nvml, "NVML_ERROR_TIMEOUT", _TIMEOUT))
        events: list[tuple[str | None, int | None, int]] = []
        for _ in range(self.max_events_per_scrape):
            try:
                data = wait(self._event_set, 0)
            except nvml.NVMLError as exc:
                if error_code(exc) == timeout_code:
                    break
                raise
            if not int(data.eventType) & xid_bit:
                continue
            uuid: str | None = None
            index: int | None = None
            try:
                uuid = text(nvml.nvmlDeviceGetUUID(data.device))
            except nvml.NVMLError:
                try:
                    index = int(nvml.nvmlDeviceGetIndex(data.device))
                except nvml.NVMLError:
                    pass
            events.append((uuid, index, int(data.eventData)))
        return events

    async def _poll_xid(self, deadline: float) -> None:
        if self._event_set is None or not any(g.xid_registered for g in self._gpus):
            return
        task = self._xid_stuck
        if task is None:
            timeout = min(self.per_call_timeout_s, deadline - asyncio.get_running_loop().time())
            if timeout <= 0:
                return
            task = asyncio.ensure_future(asyncio.to_thread(self._drain_blocking))
            await asyncio.wait({task}, timeout=timeout)
        if not task.done():  # a late drain keeps its events; a later collect counts them
            self._xid_stuck = task
            return
        self._xid_stuck = None
        try:
            events = task.result()
        except Exception as exc:
            log.debug("draining NVML events on %s failed: %s", self.host, exc)
            return
        by_uuid = {g.uuid: g for g in self._gpus if g.uuid}
        for uuid, index, xid in events:
            gpu = by_uuid.get(uuid or "")
            if gpu is None and index is not None and 0 <= index < len(self._gpus):
                gpu = self._gpus[index]
            if gpu is None:
                log.warning("XID %d on %s from an unidentifiable GPU; not counted", xid, self.host)
                continue
            log.warning("XID %d on gpu %d (%s) on %s", xid, gpu.index, gpu.uuid, self.host)
            gpu.xid_counts[xid] = gpu.xid_counts.get(xid, 0) + 1
            gpu.last_xid = xid
