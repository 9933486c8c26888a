"""Canonical names of the GPU series the NVML source writes, in one place.

The source writes these names; :mod:`collector.nvml.dcgm_names` reads them back to render the
dcgm-exporter dialect. Keeping both sides on the same constants means a rename cannot silently
break the dcgm view. Units follow Prometheus conventions (base units: bytes, watts, joules,
hertz, ratios 0..1); NVML's own units (mW, mJ, MHz, KB/s, percent) are converted at the source.
"""

from __future__ import annotations

GPU_UP = "gpu_up"
UTILIZATION = "gpu_utilization_ratio"
MEMORY_COPY_UTILIZATION = "gpu_memory_copy_utilization_ratio"
MEMORY_USED = "gpu_memory_used_bytes"
MEMORY_FREE = "gpu_memory_free_bytes"
MEMORY_TOTAL = "gpu_memory_total_bytes"
POWER = "gpu_power_watts"
ENERGY = "gpu_energy_joules_total"
TEMPERATURE = "gpu_temperature_celsius"
SM_CLOCK = "gpu_sm_clock_hertz"
MEMORY_CLOCK = "gpu_memory_clock_hertz"
PCIE_TX = "gpu_pcie_tx_bytes_per_second"
PCIE_RX = "gpu_pcie_rx_bytes_per_second"
NVLINK_TX = "gpu_nvlink_tx_bytes_total"
NVLINK_RX = "gpu_nvlink_rx_bytes_total"
ECC_ERRORS = "gpu_ecc_errors_total"  # labels type=volatile|aggregate, kind=corrected|uncorrected
CLOCK_EVENT_REASONS = "gpu_clock_event_reasons"  # the raw NVML bitmask
CLOCK_EVENT_REASON = "gpu_clock_event_reason_active"  # label reason=<name>, 0 or 1
XID_ERRORS = "gpu_xid_errors_total"  # label xid=<code>
LAST_XID = "gpu_last_xid"
# What the node runs (label component = driver | cuda_driver | nvml | vbios, version = ...), 1.
SOFTWARE_INFO = "node_software_info"

# Clock-event (throttle) reasons: our label value, the pynvml constant name, and its value in
# nvml.h (used when an older binding lacks the constant).
CLOCK_REASONS: tuple[tuple[str, str, int], ...] = (
    ("gpu_idle", "nvmlClocksEventReasonGpuIdle", 0x1),
    ("applications_clocks_setting", "nvmlClocksEventReasonApplicationsClocksSetting", 0x2),
    ("sw_power_cap", "nvmlClocksEventReasonSwPowerCap", 0x4),
    ("hw_slowdown", "nvmlClocksEventReasonHwSlowdown", 0x8),
    ("sync_boost", "nvmlClocksEventReasonSyncBoost", 0x10),
    ("sw_thermal_slowdown", "nvmlClocksEventReasonSwThermalSlowdown", 0x20),
    ("hw_thermal_slowdown", "nvmlClocksEventReasonHwThermalSlowdown", 0x40),
    ("hw_power_brake_slowdown", "nvmlClocksEventReasonHwPowerBrakeSlowdown", 0x80),
    ("display_clock_setting", "nvmlClocksEventReasonDisplayClockSetting", 0x100),
)
