"""Shared bodies and helpers for the collector.exposition.parser tests."""

from __future__ import annotations

import math

from collector.exposition import ParseResult, parse_exposition

TS = 1_700_000_000_000

# --- fixtures written for these tests, in the shapes of the real exporters --------------------

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.41796875
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.234567e+06
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7769301736864982e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 812.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="meta-llama/Llama-3.1-8B-Instruct"} 17.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.02",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 790.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="2.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 829.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 829.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 829.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 96.30129837989807
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_gpu_blocks="7281"} 1.0
"""

DCGM = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445556",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 1755
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 412.337000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445556",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 96.01
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15",container="vllm",namespace="inference",pod="vllm-0"} 98213311045
# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.
# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 0.000003
"""

TGI = """\
# TYPE tgi_request_count counter
tgi_request_count 1520

# TYPE tgi_request_failure counter
tgi_request_failure{err="validation"} 4
tgi_request_failure{err="overloaded"} 1

# TYPE tgi_queue_size gauge
tgi_queue_size 2

# TYPE tgi_batch_inference_duration histogram
tgi_batch_inference_duration_bucket{method="prefill",le="0.000015"} 0
tgi_batch_inference_duration_bucket{method="prefill",le="0.0000225"} 0
tgi_batch_inference_duration_bucket{method="prefill",le="0.05"} 377
tgi_batch_inference_duration_bucket{method="prefill",le="+Inf"} 402
tgi_batch_inference_duration_sum{method="prefill"} 19.554219361
tgi_batch_inference_duration_count{method="prefill"} 402

# TYPE tgi_request_mean_time_per_token_duration summary
tgi_request_mean_time_per_token_duration{quantile="0.5"} 0.021
tgi_request_mean_time_per_token_duration{quantile="0.99"} 0.0483
tgi_request_mean_time_per_token_duration_sum 31.9
tgi_request_mean_time_per_token_duration_count 1515
"""

TRITON = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="ensemble",version="1"} 2048
nv_inference_request_success{model="tensorrt_llm",version="1"} 2048
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds (includes cached requests)
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="tensorrt_llm",version="1"} 9.87654e+08
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43"} 0.87
# HELP nv_trt_llm_kv_cache_block_statistics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_statistics gauge
nv_trt_llm_kv_cache_block_statistics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 6239
nv_trt_llm_kv_cache_block_statistics{kv_cache_block_type="free",model="tensorrt_llm",version="1"} 6120
nv_trt_llm_kv_cache_block_statistics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 119
"""

OPENMETRICS = """\
# TYPE vllm:prompt_tokens counter
# HELP vllm:prompt_tokens Number of prefill tokens processed.
vllm:prompt_tokens_total{engine="0",model_name="m"} 42.0 1700000000.5
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:e2e_request_latency_seconds histogram
# UNIT vllm:e2e_request_latency_seconds seconds
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 3 # {trace_id="4bf92f3577b34da6"} 0.61 1700000000.123
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 4
vllm:e2e_request_latency_seconds_count{model_name="m"} 4
vllm:e2e_request_latency_seconds_sum{model_name="m"} 5.5
# TYPE build info
build_info{version="0.9.1"} 1
# EOF
"""

Triple = tuple[str, tuple[tuple[str, str], ...], str]


def _v(value: float) -> str:
    return "nan" if math.isnan(value) else repr(float(value))


def parse(body: str | bytes, **kw: object) -> ParseResult:
    return parse_exposition(body, default_ts_ms=TS, **kw)  # type: ignore[arg-type]


def triples(result: ParseResult) -> list[Triple]:
    return [(s.series.name, s.series.labels, _v(s.value)) for s in result.batch.samples()]

