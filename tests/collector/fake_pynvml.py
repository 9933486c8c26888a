"""A stand-in for the ``pynvml`` module: eight H100-like GPUs, with faults on demand.

Only the names the NVML source uses exist, spelled as in nvidia-ml-py (function names,
``NVMLError`` and its ``NVMLError_*`` subclasses carrying ``.value``, ``NVML_*`` constants,
``nvmlEventType*`` bits). Every call is counted per GPU index in ``calls`` so tests can assert
that an unsupported field is never asked for twice.

Faults: ``unsupported[gpu]`` (function names answering NotSupported), ``lose(gpu)`` (every
device call raises GpuIsLost, or the error given; ``nvmlDeviceGetIndex`` keeps working, as the
index is cached in the handle), ``init_error`` (raised by ``nvmlInit``), ``hang(gpu, fn)``
(the call blocks until ``release()``), ``inject_xid(gpu, xid)`` (an event for a registered GPU).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999


class NVMLError(Exception):
    """``.value`` is the nvmlReturn_t code; each subclass fixes its own, as pynvml's do."""

    code = NVML_ERROR_UNKNOWN

    def __init__(self, value: int | None = None) -> None:
        self.value = self.code if value is None else value
        super().__init__(self.value)

    def __str__(self) -> str:
        return type(self).__name__.removeprefix("NVMLError_")


class NVMLError_NotSupported(NVMLError):
    code = NVML_ERROR_NOT_SUPPORTED


class NVMLError_NoPermission(NVMLError):
    code = NVML_ERROR_NO_PERMISSION


class NVMLError_DriverNotLoaded(NVMLError):
    code = NVML_ERROR_DRIVER_NOT_LOADED


class NVMLError_Timeout(NVMLError):
    code = NVML_ERROR_TIMEOUT


class NVMLError_LibraryNotFound(NVMLError):
    code = NVML_ERROR_LIBRARY_NOT_FOUND


class NVMLError_GpuIsLost(NVMLError):
    code = NVML_ERROR_GPU_IS_LOST


class NVMLError_Unknown(NVMLError):
    code = NVML_ERROR_UNKNOWN


Error = type[NVMLError]

# DGX H100 layout: eight SXM boards behind these PCI bus ids.
BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
MODEL = "NVIDIA H100 80GB HBM3"
MEMORY_TOTAL = 81559 * 2**20
TX_KIB, RX_KIB = 138, 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX / _RX


def uuid_of(index: int) -> str:
    return f"GPU-5e1d0c4a-7b2f-4c31-9a60-{index:012x}"


@dataclass(frozen=True)
class Handle:
    index: int


class FakeNvml:
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_Timeout = NVMLError_Timeout
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_Unknown = NVMLError_Unknown
    NVML_SUCCESS = NVML_SUCCESS
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_FUNCTION_NOT_FOUND = NVML_ERROR_FUNCTION_NOT_FOUND
    NVML_ERROR_TIMEOUT = NVML_ERROR_TIMEOUT
    NVML_ERROR_GPU_IS_LOST = NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_UNKNOWN = NVML_ERROR_UNKNOWN
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = TX_KIB
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = RX_KIB
    nvmlEventTypeSingleBitEccError = 0x1
    nvmlEventTypeDoubleBitEccError = 0x2
    nvmlEventTypeXidCriticalError = 0x8
    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksEventReasonHwSlowdown = 0x8

    def __init__(self, gpu_count: int = 8, *, unsupported: dict[int, set[str]] | None = None) -> None:
        self.gpu_count = gpu_count
        self.unsupported = unsupported or {}
        self.lost: dict[int, Error] = {}
        self.init_error: Error | None = None
        self.no_xid: set[int] = set()  # GPUs whose supported event types lack XID
        self.calls: Counter[tuple[str, int | None]] = Counter()
        self.wait_timeouts: list[int] = []
        self.initialized = False
        self._lock = threading.Lock()
        self._hangs: set[tuple[int, str]] = set()
        self._release = threading.Event()
        self._registered: dict[int, int] = {}
        self._events: list[SimpleNamespace] = []
        self._energy = [1_000_000_000 + 1000 * i for i in range(gpu_count)]
        self.processes: dict[int, list[int]] = {}  # GPU index -> pids of its compute processes
        # What nvidia-ml-py returns: str for the texts (bytes on old bindings), an int for CUDA.
        self.driver_version: str | bytes = "550.54.15"
        self.cuda_driver_version = 12040
        self.nvml_version = "12.550.54.15"
        self.vbios = ["96.00.89.00.01"] * gpu_count

    # -- test controls -------------------------------------------------------------------

    def lose(self, index: int, error: Error = NVMLError_GpuIsLost) -> None:
        self.lost[index] = error

    def hang(self, index: int, function: str) -> None:
        self._hangs.add((index, function))

    def release(self) -> None:
        self._release.set()

    def inject_xid(self, index: int, xid: int) -> None:
        with self._lock:
            if self._registered.get(index, 0) & self.nvmlEventTypeXidCriticalError:
                self._events.append(
                    SimpleNamespace(
                        device=Handle(index),
                        eventType=self.nvmlEventTypeXidCriticalError,
                        eventData=xid,
                        gpuInstanceId=0xFFFFFFFF,
                        computeInstanceId=0xFFFFFFFF,
                    )
                )

    def count(self, function: str, index: int | None = None) -> int:
        return self.calls[(function, index)]

    # -- library -------------------------------------------------------------------------

    def _note(self, function: str, index: int | None) -> None:
        with self._lock:
            self.calls[(function, index)] += 1

    def _device(self, function: str, handle: Handle) -> int:
        index = handle.index
        self._note(function, index)
        if not self.initialized:
            raise NVMLError(1)  # Uninitialized
        if (index, function) in self._hangs:
            self._release.wait(10)
        if index in self.lost and function != "nvmlDeviceGetIndex":
            raise self.lost[index]()
        if function in self.unsupported.get(index, set()):
            raise NVMLError_NotSupported()
        return index

    def nvmlInit(self) -> None:
        self._note("nvmlInit", None)
        if self.init_error is not None:
            raise self.init_error()
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._note("nvmlShutdown", None)
        self.initialized = False

    def _system(self, function: str) -> None:
        self._note(function, None)
        if not self.initialized:
            raise NVMLError(1)
        if function in self.unsupported.get(-1, set()):
            raise NVMLError_NotSupported()

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._system("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._system("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._system("nvmlSystemGetNVMLVersion")
        return self.nvml_version

    def nvmlDeviceGetVbiosVersion(self, handle: Handle) -> str:
        return self.vbios[self._device("nvmlDeviceGetVbiosVersion", handle)]

    def nvmlDeviceGetCount(self) -> int:
        self._note("nvmlDeviceGetCount", None)
        return self.gpu_count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        return Handle(self._device("nvmlDeviceGetHandleByIndex", Handle(index)))

    def nvmlDeviceGetIndex(self, handle: Handle) -> int:
        return self._device("nvmlDeviceGetIndex", handle)

    def nvmlDeviceGetUUID(self, handle: Handle) -> str:
        return uuid_of(self._device("nvmlDeviceGetUUID", handle))

    def nvmlDeviceGetName(self, handle: Handle) -> str:
        self._device("nvmlDeviceGetName", handle)
        return MODEL

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> SimpleNamespace:
        index = self._device("nvmlDeviceGetPciInfo", handle)
        return SimpleNamespace(busId=f"00000000:{BUS_IDS[index % 8]}:00.0".encode())  # bytes, as ctypes gives

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> SimpleNamespace:
        index = self._device("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=10 * index + 5, memory=3 * index)

    def nvmlDeviceGetMemoryInfo(self, handle: Handle) -> SimpleNamespace:
        index = self._device("nvmlDeviceGetMemoryInfo", handle)
        used = (index + 1) * 2**30 + 12345
        return SimpleNamespace(total=MEMORY_TOTAL, used=used, free=MEMORY_TOTAL - used)

    def nvmlDeviceGetPowerUsage(self, handle: Handle) -> int:
        return 100_000 + 1000 * self._device("nvmlDeviceGetPowerUsage", handle) + 206

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Handle) -> int:
        index = self._device("nvmlDeviceGetTotalEnergyConsumption", handle)
        with self._lock:
            self._energy[index] += 1_500_000
            return self._energy[index]

    def nvmlDeviceGetTemperature(self, handle: Handle, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 30 + self._device("nvmlDeviceGetTemperature", handle)

    def nvmlDeviceGetClockInfo(self, handle: Handle, clock: int) -> int:
        self._device("nvmlDeviceGetClockInfo", handle)
        return {self.NVML_CLOCK_SM: 1980, self.NVML_CLOCK_MEM: 2619}[clock]

    def nvmlDeviceGetPcieThroughput(self, handle: Handle, counter: int) -> int:
        index = self._device("nvmlDeviceGetPcieThroughput", handle)
        return (500 if counter == self.NVML_PCIE_UTIL_TX_BYTES else 600) + index

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[SimpleNamespace]:
        index = self._device("nvmlDeviceGetComputeRunningProcesses", handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=1 << 30) for pid in self.processes.get(index, [])]

    def nvmlDeviceGetFieldValues(self, handle: Handle, field_ids: list[tuple[int, int]]) -> list[Any]:
        index = self._device("nvmlDeviceGetFieldValues", handle)
        out = []
        for field_id, scope in field_ids:
            kib = {TX_KIB: 4_000_000, RX_KIB: 3_000_000}.get(field_id)
            status = NVML_SUCCESS if kib is not None and scope == 0xFFFFFFFF else NVML_ERROR_NOT_SUPPORTED
            out.append(
                SimpleNamespace(
                    fieldId=field_id,
                    scopeId=scope,
                    nvmlReturn=status,
                    valueType=self.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
                    value=SimpleNamespace(ullVal=(kib or 0) + index),
                )
            )
        return out

    def nvmlDeviceGetTotalEccErrors(self, handle: Handle, error_type: int, counter_type: int) -> int:
        index = self._device("nvmlDeviceGetTotalEccErrors", handle)
        corrected = error_type == self.NVML_MEMORY_ERROR_TYPE_CORRECTED
        return (index if corrected else 0) + (100 if counter_type == self.NVML_AGGREGATE_ECC else 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Handle) -> int:
        index = self._device("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return {0: 0x1, 1: 0x4 | 0x8}.get(index, 0)

    def nvmlDeviceGetSupportedEventTypes(self, handle: Handle) -> int:
        index = self._device("nvmlDeviceGetSupportedEventTypes", handle)
        return 0x3 if index in self.no_xid else 0x3 | self.nvmlEventTypeXidCriticalError

    def nvmlDeviceRegisterEvents(self, handle: Handle, event_types: int, event_set: object) -> None:
        index = self._device("nvmlDeviceRegisterEvents", handle)
        assert event_set == "event-set"
        with self._lock:
            self._registered[index] = self._registered.get(index, 0) | event_types

    def nvmlEventSetCreate(self) -> str:
        self._note("nvmlEventSetCreate", None)
        return "event-set"

    def nvmlEventSetFree(self, event_set: object) -> None:
        self._note("nvmlEventSetFree", None)

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> SimpleNamespace:
        self._note("nvmlEventSetWait_v2", None)
        with self._lock:
            self.wait_timeouts.append(timeout_ms)
            if not self._events:
                raise NVMLError_Timeout()
            return self._events.pop(0)
