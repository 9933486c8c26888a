"""Reading one GPU through NVML: the per-GPU state and the field table.

Every NVML call runs in a worker thread (NVML calls block, sometimes for seconds on a sick GPU)
and is bounded by the smaller of the per-call timeout and what is left of the scrape deadline.
A call that does not return in time cannot be cancelled: its thread is remembered as
``GpuState.stuck`` and the GPU is reported down until that thread finishes, so a hung driver
costs at most one thread per GPU instead of one per scrape.

Errors are sorted by what they say about the GPU, not the call:

* NOT_SUPPORTED / FUNCTION_NOT_FOUND: the field does not exist on this GPU or driver; it is
  remembered and never asked for again (consumer boards lack ECC, PCIe cards lack NVLink).
* GPU_IS_LOST / UNKNOWN / timeout: the GPU itself is gone or hung; it is down for this scrape.
* anything else (NO_PERMISSION, NO_DATA, ...): that field is skipped for this scrape only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.nvml import metrics as m
from store.types import Sample, SeriesKey

log = logging.getLogger(__name__)

Labels = tuple[tuple[str, str], ...]

# nvml.h values, used when an older binding lacks the constant.
_UINT_MAX = 0xFFFFFFFF  # field-value scope: all NVLink links summed
_FI_NVLINK_DATA_TX, _FI_NVLINK_DATA_RX = 138, 139
# nvmlValueType_t -> the member of the nvmlValue_t union that holds it.
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class GpuDown(Exception):
    """This GPU cannot be read this scrape; ``reason`` is a stable word, the message says why."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(eq=False)
class GpuState:
    index: int
    handle: Any = None
    uuid: str = ""
    name: str = ""
    pci_bus_id: str = ""
    vbios: str = ""
    unsupported: set[str] = field(default_factory=set)
    stuck: asyncio.Future[Any] | None = None
    up: bool = True  # what the previous scrape reported, so only changes are logged
    xid_tried: bool = False
    xid_registered: bool = False
    last_xid: int = 0
    xid_counts: dict[int, int] = field(default_factory=dict)

    def labels(self, host: str) -> Labels:
        return (
            ("gpu", str(self.index)),
            ("uuid", self.uuid),
            ("gpu_model", self.name),
            ("pci_bus_id", self.pci_bus_id),
            ("host", host),
        )


def error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def text(value: object) -> str:
    """pynvml returns ``str`` for most strings but ``bytes`` for ctypes char arrays (busId)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    return str(value)


def _swallow(future: asyncio.Future[Any]) -> None:
    # A stuck call's late result or error has no reader; fetch it so asyncio does not warn.
    if not future.cancelled():
        future.exception()


class GpuReader:
    """Makes the NVML calls for one GPU at a time; holds no per-GPU state itself."""

    def __init__(self, nvml: Any, per_call_timeout_s: float) -> None:
        self.nvml = nvml
        self.per_call_timeout_s = per_call_timeout_s

        def code(name: str, default: int) -> int:
            return int(getattr(nvml, name, default))

        self.not_supported = {code("NVML_ERROR_NOT_SUPPORTED", 3), code("NVML_ERROR_FUNCTION_NOT_FOUND", 13)}
        self.lost = {code("NVML_ERROR_GPU_IS_LOST", 15), code("NVML_ERROR_UNKNOWN", 999)}
        self.success = code("NVML_SUCCESS", 0)

    async def call(self, gpu: GpuState, deadline: float, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in a thread; GpuDown when it is late or says the GPU is lost."""
        loop = asyncio.get_running_loop()
        timeout = min(self.per_call_timeout_s, deadline - loop.time())
        name = getattr(fn, "__name__", "nvml call")
        if timeout <= 0:
            raise GpuDown("deadline", f"scrape deadline passed before {name}")
        task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            gpu.stuck = task
            task.add_done_callback(_swallow)
            raise GpuDown("timeout", f"{name} did not return within {timeout:.3g}s")
        try:
            return task.result()
        except self.nvml.NVMLError as exc:
            if error_code(exc) in self.lost:
                raise GpuDown("lost", f"{name}: {exc}") from exc
            raise

    async def read(self, gpu: GpuState, deadline: float, key: str, names: tuple[str, ...], *args: Any) -> Any:
        """One field: its value, or None when unsupported (remembered) or failing this once."""
        if key in gpu.unsupported:
            return None
        fn = next((f for f in (getattr(self.nvml, n, None) for n in names) if f is not None), None)
        if fn is None:  # the binding is older than the field
            gpu.unsupported.add(key)
            return None
        try:
            return await self.call(gpu, deadline, fn, gpu.handle, *args)
        except self.nvml.NVMLError as exc:
            if error_code(exc) in self.not_supported:
                gpu.unsupported.add(key)
                log.debug("gpu %d: %s not supported; not asking again", gpu.index, key)
            else:
                log.debug("gpu %d: %s failed this scrape: %s", gpu.index, key, exc)
            return None

    async def identify(self, gpu: GpuState, deadline: float) -> None:
        """Handle and identity labels, fetched once (retried each scrape until they succeed)."""
        if gpu.uuid:
            return
        nvml = self.nvml
        try:
            if gpu.handle is None:
                gpu.handle = await self.call(gpu, deadline, nvml.nvmlDeviceGetHandleByIndex, gpu.index)
            uuid = text(await self.call(gpu, deadline, nvml.nvmlDeviceGetUUID, gpu.handle))
            name = text(await self.call(gpu, deadline, nvml.nvmlDeviceGetName, gpu.handle))
            pci = await self.call(gpu, deadline, nvml.nvmlDeviceGetPciInfo, gpu.handle)
        except nvml.NVMLError as exc:
            raise GpuDown("identify", f"gpu {gpu.index}: {exc}") from exc
        gpu.name, gpu.pci_bus_id, gpu.uuid = name, text(pci.busId), uuid
        vbios = await self.read(gpu, deadline, "vbios", ("nvmlDeviceGetVbiosVersion",))
        gpu.vbios = text(vbios) if vbios is not None else ""

    async def read_gpu(self, gpu: GpuState, deadline: float, ts_ms: int, host: str) -> list[Sample]:
        """All fields of one GPU as samples; raises GpuDown when the GPU cannot be read."""
        await self.identify(gpu, deadline)
        nvml, base = self.nvml, gpu.labels(host)
        out: list[Sample] = []

        def put(name: str, value: float, extra: Labels = ()) -> None:
            out.append(Sample(SeriesKey(name, base + extra), ts_ms, float(value)))

        async def get(key: str, fn: str, *args: Any) -> Any:
            return await self.read(gpu, deadline, key, (fn,), *args)

        if gpu.vbios:
            put(m.SOFTWARE_INFO, 1.0, (("component", "vbios"), ("version", gpu.vbios)))
        util = await get("utilization", "nvmlDeviceGetUtilizationRates")
        if util is not None:
            put(m.UTILIZATION, util.gpu / 100.0)
            put(m.MEMORY_COPY_UTILIZATION, util.memory / 100.0)
        mem = await get("memory", "nvmlDeviceGetMemoryInfo")
        if mem is not None:
            put(m.MEMORY_USED, mem.used)
            put(m.MEMORY_FREE, mem.free)
            put(m.MEMORY_TOTAL, mem.total)
        if (mw := await get("power", "nvmlDeviceGetPowerUsage")) is not None:
            put(m.POWER, mw / 1000.0)
        if (mj := await get("energy", "nvmlDeviceGetTotalEnergyConsumption")) is not None:
            put(m.ENERGY, mj / 1000.0)
        temp_gpu = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        if (celsius := await get("temperature", "nvmlDeviceGetTemperature", temp_gpu)) is not None:
            put(m.TEMPERATURE, celsius)
        for key, metric, const, default in (
            ("sm_clock", m.SM_CLOCK, "NVML_CLOCK_SM", 1),
            ("memory_clock", m.MEMORY_CLOCK, "NVML_CLOCK_MEM", 2),
        ):
            mhz = await get(key, "nvmlDeviceGetClockInfo", getattr(nvml, const, default))
            if mhz is not None:
                put(metric, mhz * 1e6)
        for key, metric, const, default in (
            ("pcie_tx", m.PCIE_TX, "NVML_PCIE_UTIL_TX_BYTES", 0),
            ("pcie_rx", m.PCIE_RX, "NVML_PCIE_UTIL_RX_BYTES", 1),
        ):
            kb_s = await get(key, "nvmlDeviceGetPcieThroughput", getattr(nvml, const, default))
            if kb_s is not None:
                put(metric, kb_s * 1024.0)  # NVML's "KB" is KiB: a byte counter shifted by 10
        await self._nvlink(gpu, deadline, put)
        for ecc_type, counter_const, counter_default in (
            ("volatile", "NVML_VOLATILE_ECC", 0),
            ("aggregate", "NVML_AGGREGATE_ECC", 1),
        ):
            for kind, err_const, err_default in (
                ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0),
                ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
            ):
                count = await get(
                    f"ecc_{ecc_type}_{kind}",
                    "nvmlDeviceGetTotalEccErrors",
                    getattr(nvml, err_const, err_default),
                    getattr(nvml, counter_const, counter_default),
                )
                if count is not None:
                    put(m.ECC_ERRORS, count, (("type", ecc_type), ("kind", kind)))
        reasons = await self.read(
            gpu,
            deadline,
            "clock_events",
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        )
        if reasons is not None:
            mask = int(reasons)
            put(m.CLOCK_EVENT_REASONS, mask)
            for label, const, default in m.CLOCK_REASONS:
                bit = int(getattr(nvml, const, default))
                put(m.CLOCK_EVENT_REASON, 1.0 if mask & bit else 0.0, (("reason", label),))
        return out

    async def _nvlink(self, gpu: GpuState, deadline: float, put: Callable[[str, float], None]) -> None:
        """NVLink data counters (KiB since driver load, all links summed) through field values."""
        nvml = self.nvml
        wanted = (
            (m.NVLINK_TX, int(getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", _FI_NVLINK_DATA_TX))),
            (m.NVLINK_RX, int(getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", _FI_NVLINK_DATA_RX))),
        )
        values = await self.read(
            gpu, deadline, "nvlink", ("nvmlDeviceGetFieldValues",), [(fid, _UINT_MAX) for _, fid in wanted]
        )
        if values is None:
            return
        unsupported = 0
        for (metric, _), fv in zip(wanted, values):
            status = int(fv.nvmlReturn)
            if status != self.success:
                unsupported += status in self.not_supported
                continue
            member = _VALUE_MEMBER.get(int(fv.valueType))
            if member is not None:
                put(metric, float(getattr(fv.value, member)) * 1024.0)
        if unsupported == len(wanted):
            gpu.unsupported.add("nvlink")
