"""Mapping tables of the inference servers: vLLM, SGLang, HuggingFace TGI, NVIDIA Triton.

Sources: ``/work/shared/reference/FORMATS.md`` section 2 (vLLM 0.33.0 ``v1/metrics/loggers.py``
plus the renamed/removed names; SGLang 0.5.23 ``metrics_collector.py``; TGI
``docs/source/reference/metrics.md``; Triton ``docs/user_guide/metrics.md`` and the
tensorrtllm_backend README).  Decisions worth knowing:

* vLLM's ``vllm:request_success_total`` counts every finished request despite its name;
  ``finished_reason`` splits it: stop/length/repetition = success, abort = abort, error =
  failure.  A reason not listed is not counted (a future "timeout" must not read as success).
* vLLM's ``*_perc`` KV gauges are already fractions ("1 means 100 percent"): no /100.
* SGLang has no success counter: success = ``num_requests_total - num_aborted_requests_total``
  (aborted requests also finish, so they are part of the total).
* TGI counters have no ``_total`` suffix; prompt/generated token totals are the ``_sum`` of its
  per-request length histograms.  ``tgi_request_mean_time_per_token_duration`` is one mean per
  request, so it maps to the per-request TPOT histogram, not to inter-token latency.
* Triton times are microsecond (``_us``) counters -> ``*_seconds_total``; TTFT comes from the
  opt-in millisecond histogram, whose ``le`` bounds are rescaled to seconds.  A failure with
  ``reason="CANCELED"`` (client cancellation) counts as abort, every other reason as failure.
"""

from __future__ import annotations

from collector.mapping.rules import (
    EngineRules,
    H,
    HSum,
    LabelPolicy,
    Rule,
    const,
    http_5xx,
    outcome_by,
    when,
)

REQUESTS = "inference_requests_total"
PROMPT = "inference_prompt_tokens_total"
GENERATION = "inference_generation_tokens_total"
RUNNING = "inference_requests_running"
WAITING = "inference_requests_waiting"
KV_USAGE = "inference_kv_cache_usage_ratio"
TTFT = "inference_time_to_first_token_seconds"
ITL = "inference_inter_token_latency_seconds"
TPOT = "inference_request_time_per_output_token_seconds"
E2E = "inference_e2e_request_latency_seconds"
QUEUE = "inference_queue_time_seconds"
# MoE (moe/): tokens routed per layer and expert, and expert-parallel balancedness (mean over max
# tokens per EP rank, SGLang's and vLLM's definition) as a summary's sum and count.
EXPERT_TOKENS = "moe_expert_tokens_total"
BALANCEDNESS = "moe_balancedness"

US = 1e-6
MS = 1e-3

VLLM_FINISHED_REASONS = {
    "stop": "success",
    "length": "success",
    "repetition": "success",
    "abort": "abort",
    "error": "failure",
}

VLLM = EngineRules(
    {
        "vllm:request_success_total": (
            Rule(REQUESTS, select=outcome_by("finished_reason", VLLM_FINISHED_REASONS)),
        ),
        "vllm:prompt_tokens_total": (Rule(PROMPT),),
        # vLLM exports no per-expert counts; our reference worker (vLLM's dialect) does in MoE mode.
        "moe_expert_tokens_total": (Rule(EXPERT_TOKENS),),
        "vllm:generation_tokens_total": (Rule(GENERATION),),
        "vllm:num_requests_running": (Rule(RUNNING),),
        "vllm:num_requests_waiting": (Rule(WAITING),),
        "vllm:kv_cache_usage_perc": (Rule(KV_USAGE, agg="mean"),),
        "vllm:gpu_cache_usage_perc": (Rule(KV_USAGE, agg="mean", rank=1),),  # deprecated 0.9
        "vllm:time_to_first_token_seconds": (H(TTFT),),
        "vllm:inter_token_latency_seconds": (H(ITL),),
        "vllm:time_per_output_token_seconds": (H(ITL, rank=1),),  # renamed ~0.11
        "vllm:request_time_per_output_token_seconds": (H(TPOT),),
        "vllm:e2e_request_latency_seconds": (H(E2E),),
        "vllm:request_queue_time_seconds": (H(QUEUE),),
        "http_requests_total": (Rule("inference_http_server_errors_total", select=http_5xx),),
    },
    LabelPolicy(
        rename={"model_name": "model"},
        # engine: data-parallel engine-core index ("0", "1"...); counts are summed over it and
        # the KV ratio averaged.  finished_reason became outcome; method/status: HTTP details.
        drop=frozenset({"engine", "finished_reason", "method", "status"}),
    ),
)

SGLANG = EngineRules(
    {
        "sglang:num_requests_total": (Rule(REQUESTS, select=const(outcome="success")),),
        # A summary without quantiles (_sum, _count), only with SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC,
        # on EP rank 0; forward_mode is kept.
        "sglang:eplb_balancedness": (H(BALANCEDNESS),),
        "sglang:num_aborted_requests_total": (
            Rule(REQUESTS, scale=-1.0, select=const(outcome="success")),
            Rule(REQUESTS, select=const(outcome="abort")),
        ),
        "sglang:prompt_tokens_total": (Rule(PROMPT),),
        "sglang:generation_tokens_total": (Rule(GENERATION),),
        "sglang:num_running_reqs": (Rule(RUNNING),),
        "sglang:num_queue_reqs": (Rule(WAITING),),
        "sglang:token_usage": (Rule(KV_USAGE, agg="mean"),),
        "sglang:time_to_first_token_seconds": (H(TTFT),),
        "sglang:inter_token_latency_seconds": (H(ITL),),
        "sglang:request_time_per_output_token_seconds": (H(TPOT),),
        "sglang:e2e_request_latency_seconds": (H(E2E),),
        "sglang:queue_time_seconds": (H(QUEUE),),
    },
    LabelPolicy(
        # early SGLang (2024-11) used `name` for the served model
        rename={"model_name": "model", "name": "model"},
        # engine_type: unified|prefill|decode, constant per server; dp_rank: summed like
        # vLLM's engine; priority / is_streaming: request classes, summed.
        drop=frozenset({"engine_type", "dp_rank", "priority", "is_streaming"}),
        dedupe=frozenset({"tp_rank", "pp_rank", "moe_ep_rank"}),
    ),
)

TGI = EngineRules(
    {
        "tgi_request_success": (Rule(REQUESTS, select=const(outcome="success")),),
        "tgi_request_failure": (Rule(REQUESTS, select=const(outcome="failure")),),
        "tgi_request_input_length": (HSum(PROMPT),),
        "tgi_request_generated_tokens": (HSum(GENERATION),),
        "tgi_batch_current_size": (Rule(RUNNING),),
        "tgi_queue_size": (Rule(WAITING),),
        "tgi_request_duration": (H(E2E),),
        "tgi_request_queue_duration": (H(QUEUE),),
        "tgi_request_mean_time_per_token_duration": (H(TPOT),),
    },
    # err: failure class (validation, overloaded, ...), summed into outcome="failure"
    LabelPolicy(drop=frozenset({"err", "method"})),
)

TRITON_INFERENCE = {
    "nv_inference_request_success": (Rule(REQUESTS, select=const(outcome="success")),),
    "nv_inference_request_failure": (
        Rule(REQUESTS, select=outcome_by("reason", {"CANCELED": "abort"}, default="failure")),
    ),
    "nv_inference_pending_request_count": (Rule(WAITING),),
    "nv_inference_request_duration_us": (Rule("inference_request_duration_seconds_total", US),),
    "nv_inference_queue_duration_us": (Rule("inference_queue_duration_seconds_total", US),),
    "nv_inference_compute_input_duration_us": (Rule("inference_compute_input_duration_seconds_total", US),),
    "nv_inference_compute_infer_duration_us": (Rule("inference_compute_infer_duration_seconds_total", US),),
    "nv_inference_compute_output_duration_us": (Rule("inference_compute_output_duration_seconds_total", US),),
    "nv_inference_first_response_histogram_ms": (H(TTFT, MS),),
    # TensorRT-LLM backend statistics
    "nv_trt_llm_request_statistics": (Rule(RUNNING, select=when("request_type", "active")),),
    "nv_trt_llm_kv_cache_block_statistics": (
        Rule(KV_USAGE, agg="num", select=when("kv_cache_block_type", "used")),
        Rule(KV_USAGE, agg="den", select=when("kv_cache_block_type", "max")),
    ),
}

TRITON_GPU = {
    "nv_gpu_utilization": (Rule("gpu_utilization_ratio"),),  # already 0..1
    "nv_gpu_memory_used_bytes": (Rule("gpu_memory_used_bytes"),),
    "nv_gpu_memory_total_bytes": (Rule("gpu_memory_total_bytes"),),
    "nv_gpu_power_usage": (Rule("gpu_power_watts"),),
    "nv_gpu_power_limit": (Rule("gpu_power_limit_watts"),),
    "nv_energy_consumption": (Rule("gpu_energy_joules_total"),),  # joules
}

TRITON = EngineRules(
    {**TRITON_INFERENCE, **TRITON_GPU},
    LabelPolicy(
        rename={"gpu_uuid": "uuid"},
        # reason became outcome; request_type / kv_cache_block_type were consumed by select
        drop=frozenset({"reason", "request_type", "kv_cache_block_type"}),
    ),
)
