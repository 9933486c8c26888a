"""The documented canonical metric set that every known engine is mapped onto.

Why a canonical set: a fleet runs vLLM, SGLang, TGI and Triton side by side, and dcgm-exporter
next to all of them. Each names the same quantity differently (``vllm:num_requests_waiting``,
``sglang:num_queue_reqs``, ``tgi_queue_size``, ``nv_inference_pending_request_count``) and in
different units (Triton microseconds, dcgm MiB / mJ / MHz / percent).  Dashboards, alerts and
cost reports query only the names below, which are in Prometheus base units (seconds, bytes,
joules, watts, hertz, ratios in 0..1) and end in ``_total`` when they are counters.

Labels common to every canonical series:

* ``engine``: ``vllm`` | ``sglang`` | ``tgi`` | ``triton`` | ``dcgm`` (the exporter it came from).
* ``model``: the served model (vLLM/SGLang ``model_name``, Triton ``model``; TGI serves one model
  and exports no label, so none is set).  GPU series carry the GPU product as ``gpu_model``
  (dcgm-exporter's ``modelName``), never ``model_name``: that is the label vLLM uses for the
  served model, and one name must not mean two things across series that are joined.
* GPU series: ``gpu`` (index), ``uuid``, ``device``, ``gpu_model``, ``host`` and, where the
  exporter sends them, ``pci_bus_id``, MIG ``GPU_I_PROFILE``/``GPU_I_ID``, Kubernetes
  ``pod``/``namespace``/``container``.
* Target labels added by the scrape loop (``job``, ``instance``, configured ones) pass through.

Which raw labels are dropped (and so summed or averaged over) is decided per engine in the
``LabelPolicy`` of :mod:`collector.mapping.rules_inference` and :mod:`collector.mapping.rules_gpu`.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

MetricType = Literal["counter", "gauge", "histogram", "summary"]


class CanonicalMetric(NamedTuple):
    type: MetricType
    unit: str  # base unit ("seconds", "bytes", ...) or "" for plain counts / codes
    help: str


def _c(unit: str, text: str) -> CanonicalMetric:
    return CanonicalMetric("counter", unit, text)


def _g(unit: str, text: str) -> CanonicalMetric:
    return CanonicalMetric("gauge", unit, text)


def _h(text: str) -> CanonicalMetric:
    return CanonicalMetric("histogram", "seconds", text)


_SOURCES_OUTCOME = (
    'Finished requests by outcome="success"|"failure"|"abort". vLLM: '
    "vllm:request_success_total by finished_reason (stop, length, repetition -> success; "
    "abort -> abort; error -> failure; other reasons are not counted). SGLang: success = "
    "sglang:num_requests_total - sglang:num_aborted_requests_total, abort = "
    "sglang:num_aborted_requests_total. TGI: tgi_request_success -> success, "
    "tgi_request_failure (all err values, incl. validation/overloaded) -> failure. Triton: "
    "nv_inference_request_success -> success, nv_inference_request_failure -> failure except "
    'reason="CANCELED" -> abort.'
)

CANONICAL: dict[str, CanonicalMetric] = {
    # --- inference engines -------------------------------------------------------------------
    "inference_requests_total": _c("", _SOURCES_OUTCOME),
    "inference_prompt_tokens_total": _c(
        "tokens",
        "Prompt (prefill) tokens processed. vLLM vllm:prompt_tokens_total, SGLang "
        "sglang:prompt_tokens_total, TGI tgi_request_input_length_sum.",
    ),
    "inference_generation_tokens_total": _c(
        "tokens",
        "Generated (decode) tokens. vLLM vllm:generation_tokens_total, SGLang "
        "sglang:generation_tokens_total, TGI tgi_request_generated_tokens_sum.",
    ),
    "inference_requests_running": _g(
        "",
        "Requests being executed now. vLLM vllm:num_requests_running, SGLang "
        "sglang:num_running_reqs, TGI tgi_batch_current_size, Triton/TensorRT-LLM "
        'nv_trt_llm_request_statistics{request_type="active"}. Summed over data-parallel ranks.',
    ),
    "inference_requests_waiting": _g(
        "",
        "Requests queued, not yet running. vLLM vllm:num_requests_waiting, SGLang "
        "sglang:num_queue_reqs, TGI tgi_queue_size, Triton nv_inference_pending_request_count.",
    ),
    "inference_kv_cache_usage_ratio": _g(
        "ratio",
        "KV-cache usage, 0..1. vLLM vllm:kv_cache_usage_perc (older vllm:gpu_cache_usage_perc; "
        "both already 0..1 despite the name), SGLang sglang:token_usage, Triton/TensorRT-LLM "
        "nv_trt_llm_kv_cache_block_statistics used/max. Mean over data-parallel ranks.",
    ),
    "inference_time_to_first_token_seconds": _h(
        "Time to first token. vLLM vllm:time_to_first_token_seconds, SGLang "
        "sglang:time_to_first_token_seconds, Triton "
        "nv_inference_first_response_histogram_ms (ms -> s, le rescaled). TGI exports none.",
    ),
    "inference_inter_token_latency_seconds": _h(
        "Latency between consecutive output tokens, one observation per token. vLLM "
        "vllm:inter_token_latency_seconds (older vllm:time_per_output_token_seconds; the new name "
        "wins when both are exported), SGLang sglang:inter_token_latency_seconds.",
    ),
    "inference_request_time_per_output_token_seconds": _h(
        "Mean time per output token, one observation per request. vLLM "
        "vllm:request_time_per_output_token_seconds, SGLang "
        "sglang:request_time_per_output_token_seconds, TGI tgi_request_mean_time_per_token_duration.",
    ),
    "inference_e2e_request_latency_seconds": _h(
        "End-to-end request latency. vLLM vllm:e2e_request_latency_seconds, SGLang "
        "sglang:e2e_request_latency_seconds, TGI tgi_request_duration.",
    ),
    "inference_queue_time_seconds": _h(
        "Time a request waited before running. vLLM vllm:request_queue_time_seconds, SGLang "
        "sglang:queue_time_seconds, TGI tgi_request_queue_duration.",
    ),
    "inference_request_duration_seconds_total": _c(
        "seconds", "Cumulative request duration. Triton nv_inference_request_duration_us / 1e6."
    ),
    "inference_queue_duration_seconds_total": _c(
        "seconds", "Cumulative queueing time. Triton nv_inference_queue_duration_us / 1e6."
    ),
    "inference_compute_input_duration_seconds_total": _c(
        "seconds",
        "Cumulative input-tensor handling time. Triton nv_inference_compute_input_duration_us / 1e6.",
    ),
    "inference_compute_infer_duration_seconds_total": _c(
        "seconds", "Cumulative model execution time. Triton nv_inference_compute_infer_duration_us / 1e6."
    ),
    "inference_compute_output_duration_seconds_total": _c(
        "seconds",
        "Cumulative output-tensor handling time. Triton nv_inference_compute_output_duration_us / 1e6.",
    ),
    "inference_http_server_errors_total": _c(
        "",
        'HTTP 5xx responses by handler. vLLM http_requests_total{status="5xx" or 5NN} summed '
        "over method. Kept apart from inference_requests_total because an engine error can be "
        'counted both as finished_reason="error" and as a 500 response.',
    ),
    # --- GPUs (dcgm-exporter; Triton's nv_gpu_* where it exports the same quantity) ----------
    "gpu_utilization_ratio": _g(
        "ratio", "GPU busy fraction 0..1. DCGM_FI_DEV_GPU_UTIL / 100; Triton nv_gpu_utilization."
    ),
    "gpu_memory_copy_utilization_ratio": _g(
        "ratio", "Memory (copy) utilization 0..1. DCGM_FI_DEV_MEM_COPY_UTIL / 100."
    ),
    "gpu_encoder_utilization_ratio": _g("ratio", "Encoder utilization 0..1. DCGM_FI_DEV_ENC_UTIL / 100."),
    "gpu_decoder_utilization_ratio": _g("ratio", "Decoder utilization 0..1. DCGM_FI_DEV_DEC_UTIL / 100."),
    "gpu_memory_used_bytes": _g(
        "bytes", "Framebuffer used. DCGM_FI_DEV_FB_USED MiB * 1048576; Triton nv_gpu_memory_used_bytes."
    ),
    "gpu_memory_free_bytes": _g("bytes", "Framebuffer free. DCGM_FI_DEV_FB_FREE MiB * 1048576."),
    "gpu_memory_reserved_bytes": _g("bytes", "Framebuffer reserved. DCGM_FI_DEV_FB_RESERVED MiB * 1048576."),
    "gpu_memory_total_bytes": _g("bytes", "Framebuffer size. Triton nv_gpu_memory_total_bytes."),
    "gpu_power_watts": _g("watts", "Power draw. DCGM_FI_DEV_POWER_USAGE (W); Triton nv_gpu_power_usage (W)."),
    "gpu_power_limit_watts": _g("watts", "Power limit. Triton nv_gpu_power_limit (W)."),
    "gpu_energy_joules_total": _c(
        "joules",
        "Energy since boot/driver load. DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION mJ / 1000; Triton "
        "nv_energy_consumption (J).",
    ),
    "gpu_temperature_celsius": _g("celsius", "GPU temperature. DCGM_FI_DEV_GPU_TEMP."),
    "gpu_memory_temperature_celsius": _g(
        "celsius", "Memory temperature. DCGM_FI_DEV_MEMORY_TEMP (blank sentinels and the 0 of GPUs without the sensor dropped)."
    ),
    "gpu_sm_clock_hertz": _g("hertz", "SM clock. DCGM_FI_DEV_SM_CLOCK MHz * 1e6."),
    "gpu_memory_clock_hertz": _g("hertz", "Memory clock. DCGM_FI_DEV_MEM_CLOCK MHz * 1e6."),
    "gpu_last_xid": _g("", "Code of the last XID error seen (0 = none). DCGM_FI_DEV_XID_ERRORS; the NVML source writes the same name."),
    "gpu_pcie_replays_total": _c("", "PCIe retries. DCGM_FI_DEV_PCIE_REPLAY_COUNTER."),
    "gpu_pcie_tx_bytes_per_second": _g(
        "bytes_per_second", "PCIe transmit rate incl. headers. DCGM_FI_PROF_PCIE_TX_BYTES."
    ),
    "gpu_pcie_rx_bytes_per_second": _g(
        "bytes_per_second", "PCIe receive rate incl. headers. DCGM_FI_PROF_PCIE_RX_BYTES."
    ),
    "gpu_nvlink_tx_bytes_per_second": _g(
        "bytes_per_second", "NVLink transmit rate. DCGM_FI_PROF_NVLINK_TX_BYTES."
    ),
    "gpu_nvlink_rx_bytes_per_second": _g(
        "bytes_per_second", "NVLink receive rate. DCGM_FI_PROF_NVLINK_RX_BYTES."
    ),
    "gpu_nvlink_errors_total": _c(
        "",
        "NVLink errors by type: crc_flit DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, crc_data "
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, replay DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, "
        "recovery DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL.",
    ),
    "gpu_ecc_errors_total": _c(
        "",
        "ECC errors by type (volatile since reboot, aggregate lifetime) and kind (corrected = "
        "single-bit, uncorrected = double-bit): DCGM_FI_DEV_ECC_SBE_VOL_TOTAL volatile/corrected, "
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL volatile/uncorrected, DCGM_FI_DEV_ECC_SBE_AGG_TOTAL "
        "aggregate/corrected, DCGM_FI_DEV_ECC_DBE_AGG_TOTAL aggregate/uncorrected.",
    ),
    "gpu_retired_pages_total": _c(
        "",
        'Retired memory pages by kind: "corrected" DCGM_FI_DEV_RETIRED_SBE, "uncorrected" '
        "DCGM_FI_DEV_RETIRED_DBE.",
    ),
    "gpu_retired_pages_pending": _g("", "Pages pending retirement. DCGM_FI_DEV_RETIRED_PENDING."),
    "gpu_remapped_rows_total": _c(
        "",
        'Remapped memory rows by kind: "corrected" DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, '
        '"uncorrected" DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS.',
    ),
    "gpu_row_remap_failure": _g("", "1 when row remapping failed. DCGM_FI_DEV_ROW_REMAP_FAILURE."),
    "gpu_throttle_seconds_total": _c(
        "seconds",
        "Time clocks were throttled, by reason (ns / 1e9): power DCGM_FI_DEV_POWER_VIOLATION, thermal "
        "DCGM_FI_DEV_THERMAL_VIOLATION, sync_boost DCGM_FI_DEV_SYNC_BOOST_VIOLATION, board_limit "
        "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION, low_util DCGM_FI_DEV_LOW_UTIL_VIOLATION, reliability "
        "DCGM_FI_DEV_RELIABILITY_VIOLATION.",
    ),
    "gpu_graphics_engine_active_ratio": _g(
        "ratio", "Graphics/compute engine active, 0..1. DCGM_FI_PROF_GR_ENGINE_ACTIVE."
    ),
    "gpu_sm_active_ratio": _g("ratio", "SM active (>= 1 warp), 0..1. DCGM_FI_PROF_SM_ACTIVE."),
    "gpu_sm_occupancy_ratio": _g(
        "ratio", "Warps resident per SM vs maximum, 0..1. DCGM_FI_PROF_SM_OCCUPANCY."
    ),
    "gpu_tensor_pipe_active_ratio": _g("ratio", "Tensor pipe active, 0..1. DCGM_FI_PROF_PIPE_TENSOR_ACTIVE."),
    "gpu_dram_active_ratio": _g("ratio", "Memory interface active, 0..1. DCGM_FI_PROF_DRAM_ACTIVE."),
    "gpu_fp64_pipe_active_ratio": _g("ratio", "FP64 pipe active, 0..1. DCGM_FI_PROF_PIPE_FP64_ACTIVE."),
    "gpu_fp32_pipe_active_ratio": _g("ratio", "FP32 pipe active, 0..1. DCGM_FI_PROF_PIPE_FP32_ACTIVE."),
    "gpu_fp16_pipe_active_ratio": _g("ratio", "FP16 pipe active, 0..1. DCGM_FI_PROF_PIPE_FP16_ACTIVE."),
    # --- mixture of experts --------------------------------------------------------------------
    "moe_expert_tokens_total": _c(
        "tokens",
        "Tokens routed to each expert of each MoE layer (labels layer, expert), a token counted once per expert "
        "it goes to. The reference worker's MoE mode moe_expert_tokens_total (model_name -> model); SGLang's "
        "expert distribution recorder (read by the sglang_experts source, not scraped).",
    ),
    "moe_balancedness": CanonicalMetric(
        "summary", "",
        "Expert-parallel balancedness per step, mean over max tokens per EP rank (1 = balanced), as a summary's "
        "_sum and _count. SGLang sglang:eplb_balancedness (with SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC); vLLM's "
        "'EPLB step: ... balancedness=' log lines (read by the NCCL log source).",
    ),
}


def sample_names(name: str) -> tuple[str, ...]:
    """The sample names a canonical family is written as (histograms: _bucket/_sum/_count)."""
    if CANONICAL[name].type == "histogram":
        return (f"{name}_bucket", f"{name}_sum", f"{name}_count")
    if CANONICAL[name].type == "summary":
        return (f"{name}_sum", f"{name}_count")
    return (name,)
