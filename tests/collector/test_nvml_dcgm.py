"""render_dcgm: our GPU samples under dcgm-exporter's names, units and labels (FORMATS.md 1.2/1.3)."""

from __future__ import annotations

import asyncio

import pytest

from collector.exposition import parse_exposition
from collector.nvml import NvmlGpuSource, render_dcgm
from store import ManualClock
from store.types import STALE_NAN, Sample, SampleBatch, SeriesKey
from tests.collector.fake_pynvml import MEMORY_TOTAL, MODEL, FakeNvml, uuid_of

T0 = 1_700_000_000_000


def scrape(fake: FakeNvml) -> SampleBatch:
    source = NvmlGpuSource(ManualClock(T0), "node-a", nvml=fake)

    async def body() -> SampleBatch:
        await source.collect(asyncio.get_running_loop().time() + 5)  # registers XID events
        fake.inject_xid(1, 79)
        return (await source.collect(asyncio.get_running_loop().time() + 5)).batch

    return asyncio.run(body())


def parsed(text: str) -> dict[tuple[str, str], tuple[float, dict[str, str]]]:
    result = parse_exposition(text, default_ts_ms=T0)
    return {
        (s.series.name, s.series.get("gpu")): (s.value, s.series.labels_dict())
        for s in result.batch.samples()
    }


def test_names_units_and_types_match_dcgm_exporter() -> None:
    text = render_dcgm(scrape(FakeNvml()))
    families = parse_exposition(text, default_ts_ms=T0).families
    assert {name: meta.type for name, meta in families.items()} == {
        "DCGM_FI_DEV_SM_CLOCK": "gauge",
        "DCGM_FI_DEV_MEM_CLOCK": "gauge",
        "DCGM_FI_DEV_GPU_TEMP": "gauge",
        "DCGM_FI_DEV_POWER_USAGE": "gauge",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
        "DCGM_FI_DEV_GPU_UTIL": "gauge",
        "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
        "DCGM_FI_DEV_XID_ERRORS": "gauge",
        "DCGM_FI_DEV_FB_FREE": "gauge",
        "DCGM_FI_DEV_FB_USED": "gauge",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "counter",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "counter",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "counter",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "counter",
        "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
        "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
    }
    v = parsed(text)
    assert v[("DCGM_FI_DEV_GPU_UTIL", "3")][0] == 35  # percent, not ratio
    assert v[("DCGM_FI_DEV_MEM_COPY_UTIL", "3")][0] == 9
    assert v[("DCGM_FI_DEV_FB_USED", "3")][0] == 4096  # MiB, floor of 4 GiB + 12345 bytes
    assert v[("DCGM_FI_DEV_FB_FREE", "3")][0] == (MEMORY_TOTAL - 4 * 2**30 - 12345) // 2**20
    assert v[("DCGM_FI_DEV_POWER_USAGE", "3")][0] == pytest.approx(103.206)  # W
    assert v[("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "3")][0] == 1_000_003_000 + 2 * 1_500_000  # mJ, as NVML
    assert v[("DCGM_FI_DEV_GPU_TEMP", "3")][0] == 33
    assert v[("DCGM_FI_DEV_SM_CLOCK", "3")][0] == 1980  # MHz
    assert v[("DCGM_FI_DEV_MEM_CLOCK", "3")][0] == 2619
    assert v[("DCGM_FI_DEV_XID_ERRORS", "1")][0] == 79  # the last XID, a gauge
    assert v[("DCGM_FI_DEV_XID_ERRORS", "3")][0] == 0
    assert v[("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "3")][0] == 3
    assert v[("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "3")][0] == 0
    assert v[("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "3")][0] == 103
    assert v[("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "3")][0] == 100
    assert v[("DCGM_FI_PROF_PCIE_TX_BYTES", "3")][0] == 503 * 1024  # bytes/s
    assert v[("DCGM_FI_DEV_GPU_TEMP", "3")][1] == {
        "gpu": "3",
        "UUID": uuid_of(3),
        "pci_bus_id": "00000000:5D:00.0",
        "device": "nvidia3",
        "modelName": MODEL,
        "Hostname": "node-a",
    }
    assert {gpu for name, gpu in v if name == "DCGM_FI_DEV_GPU_TEMP"} == {str(i) for i in range(8)}


def test_values_are_printed_as_dcgm_exporter_prints_them() -> None:
    lines = render_dcgm(scrape(FakeNvml())).splitlines()
    power = next(line for line in lines if line.startswith('DCGM_FI_DEV_POWER_USAGE{gpu="3"'))
    assert power.endswith(" 103.206000")  # Go %f
    fb = next(line for line in lines if line.startswith('DCGM_FI_DEV_FB_USED{gpu="3"'))
    assert fb.endswith(" 4096")
    assert fb.startswith(
        f'DCGM_FI_DEV_FB_USED{{gpu="3",UUID="{uuid_of(3)}",pci_bus_id="00000000:5D:00.0",'
        f'device="nvidia3",modelName="{MODEL}",Hostname="node-a"}}'
    )
    temps = [line for line in lines if line.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    assert [line.split('"')[1] for line in temps] == [str(i) for i in range(8)]  # GPU order


def test_newer_hostname_spelling_and_unsupported_fields() -> None:
    fake = FakeNvml(unsupported={2: {"nvmlDeviceGetTotalEccErrors"}})
    text = render_dcgm(scrape(fake), hostname_label="hostname")
    v = parsed(text)
    assert v[("DCGM_FI_DEV_GPU_TEMP", "0")][1]["hostname"] == "node-a"
    assert "Hostname" not in text
    assert ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "2") not in v
    assert ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "1") in v


def test_latest_sample_wins_and_stale_or_unknown_series_are_dropped() -> None:
    labels = {"gpu": "0", "uuid": "GPU-x", "gpu_model": 'A "quoted" name', "pci_bus_id": "b", "host": "h"}
    temp = SeriesKey.of("gpu_temperature_celsius", labels)
    power = SeriesKey.of("gpu_power_watts", labels)
    samples = [
        Sample(temp, T0 + 1000, 41.0),
        Sample(temp, T0, 40.0),
        Sample(power, T0, STALE_NAN),
        Sample(SeriesKey.of("gpu_up", gpu="0", uuid="GPU-x"), T0, 1.0),
    ]
    text = render_dcgm(samples)
    v = parsed(text)
    assert list(v) == [("DCGM_FI_DEV_GPU_TEMP", "0")]
    assert v[("DCGM_FI_DEV_GPU_TEMP", "0")][0] == 41
    assert v[("DCGM_FI_DEV_GPU_TEMP", "0")][1]["modelName"] == 'A "quoted" name'
    assert render_dcgm([]) == ""
