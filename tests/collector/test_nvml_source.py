"""NvmlGpuSource against the fake NVML: values and units, then every failure mode."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from collector.nvml import NvmlGpuSource
from collector.source import ScrapeResult
from store import ManualClock
from store.types import SeriesKey
from tests.collector.fake_pynvml import (
    MEMORY_TOTAL,
    MODEL,
    FakeNvml,
    NVMLError,
    NVMLError_DriverNotLoaded,
    NVMLError_GpuIsLost,
    NVMLError_LibraryNotFound,
    NVMLError_Unknown,
    uuid_of,
)

T = TypeVar("T")
IDENTITY = {"gpu", "uuid", "gpu_model", "pci_bus_id", "host"}
Values = dict[tuple[str, str, tuple[tuple[str, str], ...]], float]


def run(body: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(body())


async def collect(source: NvmlGpuSource, timeout: float = 5.0) -> ScrapeResult:
    return await source.collect(asyncio.get_running_loop().time() + timeout)


def values(result: ScrapeResult) -> Values:
    """(name, gpu, labels other than the identity ones) -> value."""
    return {
        (
            s.series.name,
            s.series.get("gpu"),
            tuple(kv for kv in s.series.labels if kv[0] not in IDENTITY),
        ): s.value
        for s in result.batch.samples()
    }


def up(result: ScrapeResult) -> dict[str, float]:
    return {
        k.get("gpu"): v
        for k, v in ((s.series, s.value) for s in result.batch.samples())
        if k.name == "gpu_up"
    }


def names_of(result: ScrapeResult, gpu: str) -> set[str]:
    return {s.series.name for s in result.batch.samples() if s.series.get("gpu") == gpu}


def make(fake: FakeNvml, **kw: float) -> tuple[NvmlGpuSource, ManualClock]:
    clock = ManualClock()
    return NvmlGpuSource(clock, "node-a", nvml=fake, **kw), clock  # type: ignore[arg-type]


def test_every_gpu_reports_every_metric_in_base_units() -> None:
    fake = FakeNvml()
    source, clock = make(fake)
    result = run(lambda: collect(source))
    assert result.health.up
    assert up(result) == {str(i): 1.0 for i in range(8)}
    v = values(result)
    g = "3"
    assert v[("gpu_utilization_ratio", g, ())] == pytest.approx(0.35)
    assert v[("gpu_memory_copy_utilization_ratio", g, ())] == pytest.approx(0.09)
    assert v[("gpu_memory_used_bytes", g, ())] == 4 * 2**30 + 12345
    assert v[("gpu_memory_free_bytes", g, ())] == MEMORY_TOTAL - (4 * 2**30 + 12345)
    assert v[("gpu_memory_total_bytes", g, ())] == MEMORY_TOTAL
    assert v[("gpu_power_watts", g, ())] == pytest.approx(103.206)
    assert v[("gpu_energy_joules_total", g, ())] == pytest.approx((1_000_003_000 + 1_500_000) / 1000)
    assert v[("gpu_temperature_celsius", g, ())] == 33
    assert v[("gpu_sm_clock_hertz", g, ())] == 1980e6
    assert v[("gpu_memory_clock_hertz", g, ())] == 2619e6
    assert v[("gpu_pcie_tx_bytes_per_second", g, ())] == 503 * 1024
    assert v[("gpu_pcie_rx_bytes_per_second", g, ())] == 603 * 1024
    assert v[("gpu_nvlink_tx_bytes_total", g, ())] == 4_000_003 * 1024
    assert v[("gpu_nvlink_rx_bytes_total", g, ())] == 3_000_003 * 1024
    ecc = {
        (t, k): v[("gpu_ecc_errors_total", g, (("kind", k), ("type", t)))]
        for t in ("volatile", "aggregate")
        for k in ("corrected", "uncorrected")
    }
    assert ecc == {
        ("volatile", "corrected"): 3,
        ("volatile", "uncorrected"): 0,
        ("aggregate", "corrected"): 103,
        ("aggregate", "uncorrected"): 100,
    }
    assert v[("gpu_clock_event_reasons", "1", ())] == 0x4 | 0x8
    active = {
        r[0][1]: val
        for (name, gpu, r), val in v.items()
        if name == "gpu_clock_event_reason_active" and gpu == "1"
    }
    assert active["sw_power_cap"] == active["hw_slowdown"] == 1.0
    assert active["gpu_idle"] == active["sw_thermal_slowdown"] == 0.0
    assert len(active) == 9
    assert v[("gpu_last_xid", g, ())] == 0
    key = next(
        s.series
        for s in result.batch.samples()
        if s.series.name == "gpu_power_watts" and s.series.get("gpu") == g
    )
    assert key.labels_dict() == {
        "gpu": "3",
        "uuid": uuid_of(3),
        "gpu_model": MODEL,
        "pci_bus_id": "00000000:5D:00.0",
        "host": "node-a",
    }
    assert SeriesKey("gpu_up", (("gpu", "3"), ("uuid", uuid_of(3)))) in result.batch.keys
    assert set(result.batch.ts_ms.tolist()) == {clock.now_ms()}


def test_unsupported_field_is_asked_for_once() -> None:
    fake = FakeNvml(
        unsupported={
            2: {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetFieldValues"}
        }
    )
    source, _ = make(fake)

    async def body() -> list[ScrapeResult]:
        return [await collect(source) for _ in range(3)]

    results = run(body)
    assert fake.count("nvmlDeviceGetPowerUsage", 2) == 1
    assert fake.count("nvmlDeviceGetTotalEccErrors", 2) == 4  # four distinct ECC fields, one try each
    assert fake.count("nvmlDeviceGetFieldValues", 2) == 1
    assert fake.count("nvmlDeviceGetPowerUsage", 1) == 3
    assert fake.count("nvmlDeviceGetUUID", 2) == 1  # identity is fetched once
    last = results[-1]
    assert up(last)["2"] == 1.0
    assert not {"gpu_power_watts", "gpu_ecc_errors_total", "gpu_nvlink_tx_bytes_total"} & names_of(last, "2")
    assert {"gpu_power_watts", "gpu_ecc_errors_total", "gpu_nvlink_tx_bytes_total"} <= names_of(last, "1")
    assert "gpu_temperature_celsius" in names_of(last, "2")


@pytest.mark.parametrize("error", [NVMLError_GpuIsLost, NVMLError_Unknown])
def test_lost_gpu_is_down_while_the_others_report(
    error: type[NVMLError], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml()
    source, _ = make(fake)

    async def body() -> list[ScrapeResult]:
        first = await collect(source)
        fake.lose(5, error)
        lost = [await collect(source), await collect(source)]
        del fake.lost[5]
        return [first, *lost, await collect(source)]

    with caplog.at_level(logging.INFO, logger="collector.nvml"):
        first, lost, lost_again, back = run(body)
    full = names_of(first, "0")
    for result in (lost, lost_again):
        assert result.health.up
        assert up(result) == {**{str(i): 1.0 for i in range(8)}, "5": 0.0}
        assert names_of(result, "5") == {"gpu_up", "gpu_last_xid"}
        assert all(names_of(result, str(i)) == full for i in range(8) if i != 5)
    assert SeriesKey("gpu_up", (("gpu", "5"), ("uuid", uuid_of(5)))) in lost.batch.keys
    assert names_of(back, "5") == full and up(back)["5"] == 1.0
    downs = [r for r in caplog.records if "is down" in r.getMessage()]
    assert len(downs) == 1 and downs[0].levelno == logging.WARNING  # a transition, not every scrape
    assert sum("is back" in r.getMessage() for r in caplog.records) == 1


def test_gpu_lost_before_it_was_identified() -> None:
    fake = FakeNvml()
    fake.lose(7)
    source, _ = make(fake)
    result = run(lambda: collect(source))
    assert up(result)["7"] == 0.0
    assert SeriesKey("gpu_up", (("gpu", "7"), ("uuid", ""))) in result.batch.keys
    assert names_of(result, "7") == {"gpu_up"}
    assert up(result)["6"] == 1.0


@pytest.mark.parametrize("error", [NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded])
def test_init_failure_is_one_log_line_and_retried_slowly(
    error: type[NVMLError], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml()
    fake.init_error = error
    source, clock = make(fake, init_retry_s=60.0)

    async def body() -> list[ScrapeResult]:
        out = [await collect(source)]
        for _ in range(5):  # 50 s of 10 s scrapes: no new nvmlInit
            clock.advance(10_000)
            out.append(await collect(source))
        clock.advance(10_000)  # 60 s after the first try
        out.append(await collect(source))
        fake.init_error = None
        clock.advance(30_000)
        out.append(await collect(source))  # still inside the back-off
        clock.advance(30_000)
        out.append(await collect(source))
        return out

    with caplog.at_level(logging.DEBUG, logger="collector.nvml"):
        results = run(body)
    for result in results[:-1]:
        assert not result.health.up
        assert result.health.reason == "nvml_unavailable"
        assert error.__name__ in result.health.error and "node-a" in result.health.error
    assert len(results[0].batch) == 0
    assert fake.count("nvmlInit") == 3
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "NVML unavailable" in warnings[0].getMessage()
    assert results[-1].health.up and up(results[-1]) == {str(i): 1.0 for i in range(8)}
    assert any("available on node-a again" in r.getMessage() for r in caplog.records)


def test_default_module_is_the_real_pynvml() -> None:
    """Without a driver here this exercises real pynvml's errors; with one, real GPUs."""
    source = NvmlGpuSource(ManualClock(), "node-a")
    result = run(lambda: collect(source, timeout=20.0))
    if result.health.up:
        assert up(result)
        run(source.close)
    else:
        assert result.health.reason == "nvml_unavailable", result.health


def test_xid_events_are_counted_once() -> None:
    fake = FakeNvml()
    fake.no_xid.add(4)
    source, _ = make(fake)

    async def body() -> list[ScrapeResult]:
        out = [await collect(source)]  # registers the event set
        fake.inject_xid(2, 79)
        out += [await collect(source), await collect(source)]
        fake.inject_xid(2, 79)
        fake.inject_xid(2, 48)
        fake.inject_xid(0, 13)
        out.append(await collect(source))
        return out

    first, one, same, more = run(body)
    assert fake.count("nvmlDeviceRegisterEvents", 2) == 1
    assert not any(n == "gpu_xid_errors_total" for n, _, _ in values(first))
    for result in (one, same):
        v = values(result)
        assert v[("gpu_xid_errors_total", "2", (("xid", "79"),))] == 1
        assert v[("gpu_last_xid", "2", ())] == 79
        assert v[("gpu_last_xid", "3", ())] == 0
    v = values(more)
    assert v[("gpu_xid_errors_total", "2", (("xid", "79"),))] == 2
    assert v[("gpu_xid_errors_total", "2", (("xid", "48"),))] == 1
    assert v[("gpu_xid_errors_total", "0", (("xid", "13"),))] == 1
    assert v[("gpu_last_xid", "2", ())] == 48
    assert "gpu_last_xid" not in names_of(more, "4")  # not registered: no XID series at all
    assert set(fake.wait_timeouts) == {0}


def test_xid_from_a_gpu_that_fell_off_the_bus_is_still_counted() -> None:
    fake = FakeNvml()
    source, _ = make(fake)

    async def body() -> ScrapeResult:
        await collect(source)
        fake.lose(6)
        fake.inject_xid(6, 79)  # the event's handle no longer answers GetUUID
        return await collect(source)

    result = run(body)
    assert up(result)["6"] == 0.0
    assert values(result)[("gpu_xid_errors_total", "6", (("xid", "79"),))] == 1


def test_a_hung_call_marks_its_gpu_down_until_it_returns() -> None:
    fake = FakeNvml()
    fake.hang(3, "nvmlDeviceGetPowerUsage")
    source, _ = make(fake, per_call_timeout_s=0.05)

    async def body() -> list[ScrapeResult]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        out = [await collect(source), await collect(source)]
        assert loop.time() - started < 2.0
        fake.release()
        while source.gpus[3].stuck is not None and not source.gpus[3].stuck.done():
            await asyncio.sleep(0.01)
        out.append(await collect(source))
        return out

    hung, busy, back = run(body)
    for result in (hung, busy):
        assert up(result) == {**{str(i): 1.0 for i in range(8)}, "3": 0.0}
    assert fake.count("nvmlDeviceGetPowerUsage", 3) == 2  # not called again while the first is stuck
    assert up(back)["3"] == 1.0 and "gpu_power_watts" in names_of(back, "3")


def test_the_scrape_deadline_bounds_init_and_calls() -> None:
    fake = FakeNvml()
    source, _ = make(fake)

    async def body() -> list[ScrapeResult]:
        now = asyncio.get_running_loop().time()
        late_init = await source.collect(now)  # init cannot finish in zero time
        ready = await collect(source)
        late = await source.collect(asyncio.get_running_loop().time() - 1)
        return [late_init, ready, late]

    late_init, ready, late = run(body)
    assert not late_init.health.up and late_init.health.reason == "timeout"
    assert ready.health.up and up(ready) == {str(i): 1.0 for i in range(8)}
    assert late.health.up and up(late) == {str(i): 0.0 for i in range(8)}
    assert fake.count("nvmlInit") == 1


def test_close_frees_the_event_set_and_shuts_down() -> None:
    fake = FakeNvml()
    source, _ = make(fake)

    async def body() -> None:
        await collect(source)
        await source.close()
        await source.close()

    run(body)
    assert fake.count("nvmlEventSetFree") == 1
    assert fake.count("nvmlShutdown") == 1


def test_the_fake_only_uses_names_real_pynvml_has() -> None:
    """Keeps the fake honest: the source cannot come to rely on a name NVML does not have."""
    import pynvml

    names = [n for n in vars(FakeNvml) if n.startswith(("nvml", "NVML"))]
    assert len(names) > 40
    missing = [n for n in names if not hasattr(pynvml, n)]
    assert missing == []
    constants = [n for n in names if isinstance(getattr(FakeNvml, n), int)]
    assert len(constants) > 20
    assert {n: getattr(FakeNvml, n) for n in constants} == {n: getattr(pynvml, n) for n in constants}


def test_versions_of_the_node_and_its_gpus() -> None:
    nvml = FakeNvml(gpu_count=2)
    nvml.cuda_driver_version = 12060
    nvml.unsupported = {-1: {"nvmlSystemGetNVMLVersion"}, 1: {"nvmlDeviceGetVbiosVersion"}}
    source = NvmlGpuSource(ManualClock(0), "n1", nvml=nvml)
    result = run(lambda: collect(source))
    info = {(s.series.get("component"), s.series.get("gpu"), s.series.get("version"))
            for s in result.batch.samples() if s.series.name == "node_software_info"}
    # an unsupported call costs only its own version; GPU 1 has no VBIOS but reports everything else
    assert info == {("driver", "", "550.54.15"), ("cuda_driver", "", "12.6"), ("vbios", "0", "96.00.89.00.01")}
    assert values(result)[("gpu_utilization_ratio", "1", ())] >= 0
