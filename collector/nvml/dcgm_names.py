"""Our canonical GPU samples rendered under dcgm-exporter's names, units and labels.

Why: NVIDIA's Grafana dashboard (grafana.com 12239) and much existing alerting query
``DCGM_FI_DEV_*`` series. Serving this text on ``/metrics`` lets them run unchanged against
hosts that have NVML but no dcgm-exporter. Canonical samples stay in base units; the
conversions back to DCGM's units (percent, MiB, MHz, mJ) happen only here.

Values are printed the way dcgm-exporter prints them: integer fields as integers, float fields
(power) with six decimals, as Go's ``%f`` does. Labels follow dcgm-exporter's GPU template:
``gpu, UUID, pci_bus_id, device="nvidia<gpu>", modelName, Hostname``. Released exporters
(<= 4.5.3-4.8.2) spell the host label ``Hostname``; newer master uses ``hostname``
(``hostname_label`` picks one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from collector.nvml import metrics as m
from store.types import Sample, SampleBatch, SeriesKey

_MIB = float(2**20)


def _round(value: float) -> int:
    return int(round(value))


def _floor(value: float) -> int:
    return int(math.floor(value))


@dataclass(frozen=True, slots=True)
class _Field:
    dcgm: str
    source: str
    type: str
    help: str
    scale: float = 1.0
    to_int: Callable[[float], int] | None = _round  # None: print as a float
    match: tuple[tuple[str, str], ...] = ()  # labels the source series must carry


def _ecc(dcgm: str, ecc_type: str, kind: str, help_text: str) -> _Field:
    return _Field(dcgm, m.ECC_ERRORS, "counter", help_text, match=(("type", ecc_type), ("kind", kind)))


# Order is output order. Help texts paraphrase dcgm-exporter's default-counters.csv.
FIELDS: tuple[_Field, ...] = (
    _Field("DCGM_FI_DEV_SM_CLOCK", m.SM_CLOCK, "gauge", "SM clock frequency (in MHz).", 1e-6),
    _Field("DCGM_FI_DEV_MEM_CLOCK", m.MEMORY_CLOCK, "gauge", "Memory clock frequency (in MHz).", 1e-6),
    _Field("DCGM_FI_DEV_GPU_TEMP", m.TEMPERATURE, "gauge", "GPU temperature (in C)."),
    _Field("DCGM_FI_DEV_POWER_USAGE", m.POWER, "gauge", "Power draw (in W).", to_int=None),
    _Field(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        m.ENERGY,
        "counter",
        "Total energy consumption since boot (in mJ).",
        1000.0,
    ),
    _Field("DCGM_FI_DEV_GPU_UTIL", m.UTILIZATION, "gauge", "GPU utilization (in %).", 100.0),
    _Field(
        "DCGM_FI_DEV_MEM_COPY_UTIL", m.MEMORY_COPY_UTILIZATION, "gauge", "Memory utilization (in %).", 100.0
    ),
    _Field("DCGM_FI_DEV_XID_ERRORS", m.LAST_XID, "gauge", "Value of the last XID error encountered."),
    _Field(
        "DCGM_FI_DEV_FB_FREE", m.MEMORY_FREE, "gauge", "Framebuffer memory free (in MiB).", 1 / _MIB, _floor
    ),
    _Field(
        "DCGM_FI_DEV_FB_USED", m.MEMORY_USED, "gauge", "Framebuffer memory used (in MiB).", 1 / _MIB, _floor
    ),
    _ecc(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "volatile",
        "corrected",
        "Total number of single-bit volatile ECC errors.",
    ),
    _ecc(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "volatile",
        "uncorrected",
        "Total number of double-bit volatile ECC errors.",
    ),
    _ecc(
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "aggregate",
        "corrected",
        "Total number of single-bit persistent ECC errors.",
    ),
    _ecc(
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "aggregate",
        "uncorrected",
        "Total number of double-bit persistent ECC errors.",
    ),
    _Field(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        m.PCIE_TX,
        "gauge",
        "The rate of data transmitted over the PCIe bus (bytes/s).",
    ),
    _Field(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        m.PCIE_RX,
        "gauge",
        "The rate of data received over the PCIe bus (bytes/s).",
    ),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _gpu_order(key: SeriesKey) -> tuple[int, str]:
    gpu = key.get("gpu")
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)


def _labels(key: SeriesKey, hostname_label: str) -> str:
    gpu = key.get("gpu")
    pairs = (
        ("gpu", gpu),
        ("UUID", key.get("uuid")),
        ("pci_bus_id", key.get("pci_bus_id")),
        ("device", f"nvidia{gpu}"),
        ("modelName", key.get("gpu_model")),
        (hostname_label, key.get("host")),
    )
    return ",".join(f'{name}="{_escape(value)}"' for name, value in pairs)


def render_dcgm(samples: SampleBatch | Iterable[Sample], *, hostname_label: str = "Hostname") -> str:
    """Prometheus text (0.0.4) of the DCGM-named series; the newest sample of each series wins.

    Series we have no DCGM name for, NaN and staleness markers are left out; a family with no
    series is left out entirely (dcgm-exporter also omits fields a GPU does not support).
    """
    rows = samples.samples() if isinstance(samples, SampleBatch) else samples
    latest: dict[SeriesKey, tuple[int, float]] = {}
    for sample in rows:
        seen = latest.get(sample.series)
        if seen is None or sample.ts_ms >= seen[0]:
            latest[sample.series] = (sample.ts_ms, sample.value)
    by_name: dict[str, list[tuple[SeriesKey, float]]] = {}
    for key, (_, value) in latest.items():
        if not math.isnan(value):
            by_name.setdefault(key.name, []).append((key, value))
    out: list[str] = []
    for spec in FIELDS:
        series = [
            (key, value)
            for key, value in by_name.get(spec.source, ())
            if all(key.get(label) == want for label, want in spec.match)
        ]
        if not series:
            continue
        out.append(f"# HELP {spec.dcgm} {spec.help}")
        out.append(f"# TYPE {spec.dcgm} {spec.type}")
        for key, value in sorted(series, key=lambda kv: _gpu_order(kv[0])):
            scaled = value * spec.scale
            text = f"{scaled:f}" if spec.to_int is None else str(spec.to_int(scaled))
            out.append(f"{spec.dcgm}{{{_labels(key, hostname_label)}}} {text}")
    return "\n".join(out) + "\n" if out else ""
