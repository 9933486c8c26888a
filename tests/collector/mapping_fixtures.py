"""Hand-written exposition bodies for the canonical-mapping tests, in each exporter's format.

Written for these tests (not copied from any capture), following FORMATS.md: prometheus-cpp
output for Triton and Go formatting for dcgm-exporter here; the vLLM / SGLang / TGI bodies live
in :mod:`tests.collector.mapping_fixtures_llm` and are re-exported.  The expected canonical
values are worked out by hand, next to each assertion, in ``test_mapping_engines.py``.
"""

from __future__ import annotations

from collector.exposition import parse_exposition
from collector.mapping import CanonicalMapper, Engine
from store.types import SampleBatch
from tests.collector.mapping_fixtures_llm import (
    SGLANG,
    SGLANG_EARLY,
    TGI,
    TS,
    VLLM_TRANSITION,
    VLLM_V0,
    VLLM_V1,
)

__all__ = [
    "DCGM_MASTER",
    "DCGM_OLD_NAMESPACE",
    "DCGM_RELEASED",
    "FIXTURES",
    "GENERIC_ONLY",
    "GPU_A",
    "SGLANG",
    "SGLANG_EARLY",
    "TGI",
    "TRITON",
    "TS",
    "UUID0",
    "UUID1",
    "VLLM_TRANSITION",
    "VLLM_V0",
    "VLLM_V1",
    "canon",
    "parse",
]

GPU_A = "GPU-7a9c9f44-ff57-1177-e21a-1740a8cf1a65"
ENS = 'model="ensemble",version="1"'

TRITON = f"""\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{{{ENS}}} 950
nv_inference_request_success{{gpu_uuid="{GPU_A}",model="llama",version="1"}} 400
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{{model="ensemble",reason="OTHER",version="1"}} 1
nv_inference_request_failure{{model="ensemble",reason="BACKEND",version="1"}} 2
nv_inference_request_failure{{model="ensemble",reason="CANCELED",version="1"}} 3
nv_inference_request_failure{{model="ensemble",reason="REJECTED",version="1"}} 4
nv_inference_request_failure{{gpu_uuid="{GPU_A}",model="llama",version="1"}} 5
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{{{ENS}}} 1900
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{{ENS}}} 6
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds (includes cached requests)
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{{{ENS}}} 123456789
# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds (includes cached requests)
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{{{ENS}}} 2500000
# HELP nv_inference_compute_input_duration_us Cumulative compute input duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_input_duration_us counter
nv_inference_compute_input_duration_us{{{ENS}}} 1000
# HELP nv_inference_compute_infer_duration_us Cumulative compute inference duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{{{ENS}}} 98765432
# HELP nv_inference_compute_output_duration_us Cumulative inference compute output duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_output_duration_us counter
nv_inference_compute_output_duration_us{{{ENS}}} 500
# HELP nv_inference_first_response_histogram_ms Duration from request to first response in milliseconds
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_bucket{{{ENS},le="100"}} 10
nv_inference_first_response_histogram_ms_bucket{{{ENS},le="500"}} 40
nv_inference_first_response_histogram_ms_bucket{{{ENS},le="2500"}} 48
nv_inference_first_response_histogram_ms_bucket{{{ENS},le="+Inf"}} 50
nv_inference_first_response_histogram_ms_sum{{{ENS}}} 31250
nv_inference_first_response_histogram_ms_count{{{ENS}}} 50
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{{gpu_uuid="{GPU_A}"}} 0.83
# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{{gpu_uuid="{GPU_A}"}} 85899345920
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{{gpu_uuid="{GPU_A}"}} 42949672960
# HELP nv_gpu_power_usage GPU power usage in watts
# TYPE nv_gpu_power_usage gauge
nv_gpu_power_usage{{gpu_uuid="{GPU_A}"}} 412.5
# HELP nv_gpu_power_limit GPU power management limit in watts
# TYPE nv_gpu_power_limit gauge
nv_gpu_power_limit{{gpu_uuid="{GPU_A}"}} 700
# HELP nv_energy_consumption GPU energy consumption in joules since the Triton Server started
# TYPE nv_energy_consumption counter
nv_energy_consumption{{gpu_uuid="{GPU_A}"}} 1234567.5
# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.1
# HELP nv_trt_llm_request_statistics TRT LLM request metrics
# TYPE nv_trt_llm_request_statistics gauge
nv_trt_llm_request_statistics{{model="tensorrt_llm",request_type="context",version="1"}} 2
nv_trt_llm_request_statistics{{model="tensorrt_llm",request_type="scheduled",version="1"}} 9
nv_trt_llm_request_statistics{{model="tensorrt_llm",request_type="max",version="1"}} 512
nv_trt_llm_request_statistics{{model="tensorrt_llm",request_type="active",version="1"}} 9
# HELP nv_trt_llm_kv_cache_block_statistics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_statistics gauge
nv_trt_llm_kv_cache_block_statistics{{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"}} 64
nv_trt_llm_kv_cache_block_statistics{{kv_cache_block_type="used",model="tensorrt_llm",version="1"}} 1560
nv_trt_llm_kv_cache_block_statistics{{kv_cache_block_type="free",model="tensorrt_llm",version="1"}} 4680
nv_trt_llm_kv_cache_block_statistics{{kv_cache_block_type="max",model="tensorrt_llm",version="1"}} 6240
"""

UUID0 = "GPU-3f1c2e4d-5a6b-7c8d-9e0f-112233445566"
UUID1 = "GPU-3f1c2e4d-5a6b-7c8d-9e0f-112233445567"
A100 = 'modelName="NVIDIA A100-SXM4-80GB"'
G0 = f'gpu="0",UUID="{UUID0}",pci_bus_id="00000000:3B:00.0",device="nvidia0",{A100},Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"'
G1 = f'gpu="1",UUID="{UUID1}",pci_bus_id="00000000:5E:00.0",device="nvidia1",{A100}'

# dcgm-exporter as released (<= 4.5.3-4.8.2): `Hostname`, Go number formatting.
DCGM_RELEASED = f"""\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{{{G0}}} 1410
# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{{{G0}}} 1593
# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{{{G0}}} 9223372036854775794
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{{{G0}}} 54
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{G0}}} 302.206000
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{G0}}} 2500000
# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Total number of PCIe retries.
# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{G0}}} 3
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{G0}}} 87
# HELP DCGM_FI_DEV_MEM_COPY_UTIL Memory utilization (in %).
# TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge
DCGM_FI_DEV_MEM_COPY_UTIL{{{G0}}} 45
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{{{G0},err_code="79",err_msg="GPU has fallen off the bus"}} 79
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{{{G0}}} 59000
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{G0}}} 21383
# HELP DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL Total number of NVLink bandwidth counters for all lanes.
# TYPE DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL counter
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{G0}}} 123
# HELP DCGM_FI_DEV_VGPU_LICENSE_STATUS vGPU License status
# TYPE DCGM_FI_DEV_VGPU_LICENSE_STATUS gauge
DCGM_FI_DEV_VGPU_LICENSE_STATUS{{{G0}}} 0
# HELP DCGM_FI_DEV_ECC_SBE_VOL_TOTAL Total number of single-bit volatile ECC errors.
# TYPE DCGM_FI_DEV_ECC_SBE_VOL_TOTAL counter
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{G0}}} 2
# HELP DCGM_FI_DEV_ECC_DBE_AGG_TOTAL Total number of double-bit persistent ECC errors.
# TYPE DCGM_FI_DEV_ECC_DBE_AGG_TOTAL counter
DCGM_FI_DEV_ECC_DBE_AGG_TOTAL{{{G0}}} 1
# HELP DCGM_FI_DEV_POWER_VIOLATION Throttling duration due to power constraints (in ns).
# TYPE DCGM_FI_DEV_POWER_VIOLATION counter
DCGM_FI_DEV_POWER_VIOLATION{{{G0}}} 1500000000
# HELP DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL Total number of NVLink flow-control CRC errors.
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{G0}}} 6
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{G0}}} 0.912345
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{G1},GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="node-a",container="",namespace="",pod=""}} 0.500000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{G1},GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-a",container="vllm",namespace="llm",pod="vllm-7"}} 0.250000
# HELP DCGM_FI_PROF_PCIE_TX_BYTES The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.
# TYPE DCGM_FI_PROF_PCIE_TX_BYTES gauge
DCGM_FI_PROF_PCIE_TX_BYTES{{{G0}}} 123456789
"""

# dcgm-exporter master after #655: lowercase `hostname`.
DCGM_MASTER = f"""\
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{gpu="0",UUID="{UUID0}",pci_bus_id="00000000:3B:00.0",device="nvidia0",{A100},hostname="node-b",DCGM_FI_DRIVER_VERSION="580.65.06"}} 1024
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{UUID0}",pci_bus_id="00000000:3B:00.0",device="nvidia0",{A100},hostname="node-b",DCGM_FI_DRIVER_VERSION="580.65.06"}} 100
"""

# dcgm-exporter --use-old-namespace (1.x/2.x naming): recognised, not mapped.
DCGM_OLD_NAMESPACE = """\
# HELP dcgm_gpu_temp GPU temperature (in C).
# TYPE dcgm_gpu_temp gauge
dcgm_gpu_temp{gpu="0",uuid="GPU-1"} 40
"""

GENERIC_ONLY = """\
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 10.95
# HELP python_gc_collections_total Number of times this generation was collected
# TYPE python_gc_collections_total counter
python_gc_collections_total{generation="0"} 1151.0
"""

FIXTURES: dict[str, tuple[str, Engine]] = {
    "vllm_v1": (VLLM_V1, "vllm"),
    "vllm_v0": (VLLM_V0, "vllm"),
    "vllm_transition": (VLLM_TRANSITION, "vllm"),
    "sglang": (SGLANG, "sglang"),
    "sglang_early": (SGLANG_EARLY, "sglang"),
    "tgi": (TGI, "tgi"),
    "triton": (TRITON, "triton"),
    "dcgm_released": (DCGM_RELEASED, "dcgm"),
    "dcgm_master": (DCGM_MASTER, "dcgm"),
    "dcgm_old_namespace": (DCGM_OLD_NAMESPACE, "dcgm"),
    "generic_only": (GENERIC_ONLY, "unknown"),
}


def parse(body: str, ts_ms: int = TS) -> SampleBatch:
    return parse_exposition(body, default_ts_ms=ts_ms).batch


def canon(body: str | SampleBatch, engine: Engine | None = None) -> dict[str, float]:
    """Canonical output as ``{'name{labels}': value}`` (a fresh mapper: no shared state)."""
    batch = parse(body) if isinstance(body, str) else body
    out = CanonicalMapper().map(batch, engine)
    result = {s.series.canonical(): s.value for s in out.samples()}
    assert len(result) == len(out), "a canonical key was emitted twice"
    return result
