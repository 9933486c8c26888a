"""Mapping table of dcgm-exporter (``DCGM_FI_*`` fields) onto the canonical ``gpu_*`` set.

Sources: ``/work/shared/reference/FORMATS.md`` section 1 and dcgm-exporter's
``etc/default-counters.csv`` (units are in each field's help text).  Conversions: percent
utilisations / 100, framebuffer MiB * 1048576, energy mJ / 1000, clocks MHz * 1e6, throttle
("violation") times ns / 1e9.  The ``DCGM_FI_PROF_*`` fields are already 0..1 ratios (or bytes/s
for PCIe/NVLink) and pass through unscaled.

Labels: ``UUID`` (and the old-namespace ``uuid``, NVLink-entity ``gpu_uuid``) -> ``uuid``,
``modelName`` -> ``gpu_model``, ``Hostname`` (released versions up to 4.5.3-4.8.2) and
``hostname`` (master since #655) -> ``host``, old ``pod_name``/``pod_namespace``/
``container_name`` -> ``pod``/``namespace``/``container``.  Dropped: every ``DCGM_FI_*`` label
(driver version, process name, serial...: a driver upgrade must not start new series), and
``err_code``/``err_msg`` on the XID gauge (they change with its value).  ``gpu``, ``device``,
``pci_bus_id``, MIG ``GPU_I_PROFILE``/``GPU_I_ID``, Kubernetes and DRA labels are kept.

DCGM reports an unsupported field as a "blank" sentinel (int64 near 2**63, e.g. the
``9223372036854775794`` memory temperature of GPUs without the sensor, or FP64 2**47 + k);
such samples are not mapped (see ``EngineRules.blank_sentinels``).
"""

from __future__ import annotations

from collector.mapping.rules import EngineRules, LabelPolicy, Rule, const

PERCENT = 0.01
MIB = 1048576.0
MILLI = 1e-3
MEGA = 1e6
NANO = 1e-9


def _ratio(target: str) -> tuple[Rule, ...]:
    return (Rule(target),)


DCGM_FAMILIES: dict[str, tuple[Rule, ...]] = {
    "DCGM_FI_DEV_GPU_UTIL": (Rule("gpu_utilization_ratio", PERCENT),),
    "DCGM_FI_DEV_MEM_COPY_UTIL": (Rule("gpu_memory_copy_utilization_ratio", PERCENT),),
    "DCGM_FI_DEV_ENC_UTIL": (Rule("gpu_encoder_utilization_ratio", PERCENT),),
    "DCGM_FI_DEV_DEC_UTIL": (Rule("gpu_decoder_utilization_ratio", PERCENT),),
    "DCGM_FI_DEV_FB_USED": (Rule("gpu_memory_used_bytes", MIB),),
    "DCGM_FI_DEV_FB_FREE": (Rule("gpu_memory_free_bytes", MIB),),
    "DCGM_FI_DEV_FB_RESERVED": (Rule("gpu_memory_reserved_bytes", MIB),),
    "DCGM_FI_DEV_POWER_USAGE": (Rule("gpu_power_watts"),),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": (Rule("gpu_energy_joules_total", MILLI),),
    "DCGM_FI_DEV_GPU_TEMP": (Rule("gpu_temperature_celsius"),),
    "DCGM_FI_DEV_MEMORY_TEMP": (Rule("gpu_memory_temperature_celsius", zero_is_blank=True),),
    "DCGM_FI_DEV_SM_CLOCK": (Rule("gpu_sm_clock_hertz", MEGA),),
    "DCGM_FI_DEV_MEM_CLOCK": (Rule("gpu_memory_clock_hertz", MEGA),),
    "DCGM_FI_DEV_XID_ERRORS": (Rule("gpu_last_xid"),),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": (Rule("gpu_pcie_replays_total"),),
    "DCGM_FI_PROF_PCIE_TX_BYTES": (Rule("gpu_pcie_tx_bytes_per_second"),),
    "DCGM_FI_PROF_PCIE_RX_BYTES": (Rule("gpu_pcie_rx_bytes_per_second"),),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": (Rule("gpu_nvlink_tx_bytes_per_second"),),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": (Rule("gpu_nvlink_rx_bytes_per_second"),),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": (
        Rule("gpu_nvlink_errors_total", select=const(type="crc_flit")),
    ),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": (
        Rule("gpu_nvlink_errors_total", select=const(type="crc_data")),
    ),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": (
        Rule("gpu_nvlink_errors_total", select=const(type="replay")),
    ),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": (
        Rule("gpu_nvlink_errors_total", select=const(type="recovery")),
    ),
    # ECC: single-bit errors are corrected, double-bit ones are not (labels as the NVML source)
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": (
        Rule("gpu_ecc_errors_total", select=const(type="volatile", kind="corrected")),
    ),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (
        Rule("gpu_ecc_errors_total", select=const(type="volatile", kind="uncorrected")),
    ),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": (
        Rule("gpu_ecc_errors_total", select=const(type="aggregate", kind="corrected")),
    ),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": (
        Rule("gpu_ecc_errors_total", select=const(type="aggregate", kind="uncorrected")),
    ),
    "DCGM_FI_DEV_RETIRED_SBE": (Rule("gpu_retired_pages_total", select=const(kind="corrected")),),
    "DCGM_FI_DEV_RETIRED_DBE": (Rule("gpu_retired_pages_total", select=const(kind="uncorrected")),),
    "DCGM_FI_DEV_RETIRED_PENDING": (Rule("gpu_retired_pages_pending"),),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": (
        Rule("gpu_remapped_rows_total", select=const(kind="corrected")),
    ),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (
        Rule("gpu_remapped_rows_total", select=const(kind="uncorrected")),
    ),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": (Rule("gpu_row_remap_failure"),),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": _ratio("gpu_graphics_engine_active_ratio"),
    "DCGM_FI_PROF_SM_ACTIVE": _ratio("gpu_sm_active_ratio"),
    "DCGM_FI_PROF_SM_OCCUPANCY": _ratio("gpu_sm_occupancy_ratio"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": _ratio("gpu_tensor_pipe_active_ratio"),
    "DCGM_FI_PROF_DRAM_ACTIVE": _ratio("gpu_dram_active_ratio"),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": _ratio("gpu_fp64_pipe_active_ratio"),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": _ratio("gpu_fp32_pipe_active_ratio"),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": _ratio("gpu_fp16_pipe_active_ratio"),
}

for _field, _reason in (
    ("POWER", "power"),
    ("THERMAL", "thermal"),
    ("SYNC_BOOST", "sync_boost"),
    ("BOARD_LIMIT", "board_limit"),
    ("LOW_UTIL", "low_util"),
    ("RELIABILITY", "reliability"),
):
    DCGM_FAMILIES[f"DCGM_FI_DEV_{_field}_VIOLATION"] = (
        Rule("gpu_throttle_seconds_total", NANO, select=const(reason=_reason)),
    )

DCGM = EngineRules(
    DCGM_FAMILIES,
    LabelPolicy(
        rename={
            "UUID": "uuid",
            "gpu_uuid": "uuid",
            "modelName": "gpu_model",
            "Hostname": "host",
            "hostname": "host",
            "pod_name": "pod",
            "pod_namespace": "namespace",
            "container_name": "container",
        },
        drop=frozenset({"err_code", "err_msg"}),
        drop_prefixes=("DCGM_FI_", "DCGM_EXP_"),
    ),
    blank_sentinels=True,
)
