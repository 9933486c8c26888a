"""vLLM, SGLang and TGI bodies for the canonical-mapping tests (see :mod:`mapping_fixtures`).

Written for these tests, not copied from any capture: prometheus_client output for vLLM and
SGLang (sorted labels, ``_created`` samples), metrics-exporter-prometheus for TGI (counters
without ``_total``).  Expected values are worked out in test_mapping_engines.py.
"""

from __future__ import annotations

TS = 1_800_000_000_000

Q = 'model_name="Qwen/Qwen2.5-7B-Instruct"'

VLLM_V1 = f"""\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",{Q}}} 5.0
vllm:num_requests_running{{engine="1",{Q}}} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",{Q}}} 2.0
vllm:num_requests_waiting{{engine="1",{Q}}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",{Q}}} 0.25
vllm:kv_cache_usage_perc{{engine="1",{Q}}} 0.75
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",{Q}}} 10000.0
vllm:prompt_tokens_total{{engine="1",{Q}}} 2345.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{{engine="0",{Q}}} 1.7769301736864982e+09
vllm:prompt_tokens_created{{engine="1",{Q}}} 1.7769301736864982e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",{Q}}} 4000.0
vllm:generation_tokens_total{{engine="1",{Q}}} 1000.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",{Q}}} 100.0
vllm:request_success_total{{engine="0",finished_reason="length",{Q}}} 20.0
vllm:request_success_total{{engine="0",finished_reason="abort",{Q}}} 7.0
vllm:request_success_total{{engine="0",finished_reason="error",{Q}}} 2.0
vllm:request_success_total{{engine="0",finished_reason="repetition",{Q}}} 1.0
vllm:request_success_total{{engine="0",finished_reason="timeout",{Q}}} 4.0
vllm:request_success_total{{engine="1",finished_reason="stop",{Q}}} 50.0
vllm:request_success_total{{engine="1",finished_reason="length",{Q}}} 5.0
vllm:request_success_total{{engine="1",finished_reason="abort",{Q}}} 3.0
vllm:request_success_total{{engine="1",finished_reason="error",{Q}}} 0.0
vllm:request_success_total{{engine="1",finished_reason="repetition",{Q}}} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.01",{Q}}} 1.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",{Q}}} 4.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="1.0",{Q}}} 9.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",{Q}}} 10.0
vllm:time_to_first_token_seconds_count{{engine="0",{Q}}} 10.0
vllm:time_to_first_token_seconds_sum{{engine="0",{Q}}} 2.5
vllm:time_to_first_token_seconds_bucket{{engine="1",le="0.01",{Q}}} 0.0
vllm:time_to_first_token_seconds_bucket{{engine="1",le="0.1",{Q}}} 2.0
vllm:time_to_first_token_seconds_bucket{{engine="1",le="1.0",{Q}}} 5.0
vllm:time_to_first_token_seconds_bucket{{engine="1",le="+Inf",{Q}}} 5.0
vllm:time_to_first_token_seconds_count{{engine="1",{Q}}} 5.0
vllm:time_to_first_token_seconds_sum{{engine="1",{Q}}} 1.25
# HELP vllm:time_to_first_token_seconds_created Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{{engine="0",{Q}}} 1.7769301736864982e+09
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.01",{Q}}} 30.0
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.05",{Q}}} 90.0
vllm:inter_token_latency_seconds_bucket{{engine="0",le="+Inf",{Q}}} 100.0
vllm:inter_token_latency_seconds_count{{engine="0",{Q}}} 100.0
vllm:inter_token_latency_seconds_sum{{engine="0",{Q}}} 2.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{{engine="0",le="1.0",{Q}}} 3.0
vllm:e2e_request_latency_seconds_bucket{{engine="0",le="+Inf",{Q}}} 10.0
vllm:e2e_request_latency_seconds_count{{engine="0",{Q}}} 10.0
vllm:e2e_request_latency_seconds_sum{{engine="0",{Q}}} 25.5
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{{engine="0",le="+Inf",{Q}}} 71.0
vllm:iteration_tokens_total_count{{engine="0",{Q}}} 71.0
vllm:iteration_tokens_total_sum{{engine="0",{Q}}} 267.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="7281"}} 1.0
# HELP http_requests_total Total number of requests by method, status and handler.
# TYPE http_requests_total counter
http_requests_total{{handler="/v1/chat/completions",method="POST",status="2xx"}} 180.0
http_requests_total{{handler="/v1/chat/completions",method="POST",status="5xx"}} 4.0
http_requests_total{{handler="/v1/chat/completions",method="GET",status="5xx"}} 2.0
http_requests_total{{handler="/v1/completions",method="POST",status="503"}} 1.0
http_requests_total{{handler="/metrics",method="GET",status="2xx"}} 1000.0
# HELP python_gc_collections_total Number of times this generation was collected
# TYPE python_gc_collections_total counter
python_gc_collections_total{{generation="0"}} 1151.0
"""

VLLM_V0 = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="facebook/opt-125m"} 1.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="facebook/opt-125m"} 0.125
# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds.
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.025",model_name="facebook/opt-125m"} 6.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="facebook/opt-125m"} 8.0
vllm:time_per_output_token_seconds_count{model_name="facebook/opt-125m"} 8.0
vllm:time_per_output_token_seconds_sum{model_name="facebook/opt-125m"} 0.16
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{finished_reason="length",model_name="facebook/opt-125m"} 3.0
vllm:request_success_total{finished_reason="stop",model_name="facebook/opt-125m"} 4.0
"""

# vLLM ~0.10: deprecated and new names side by side (values differ here on purpose, so the
# test can tell which one won).
VLLM_TRANSITION = """\
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds. DEPRECATED
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{engine="0",le="0.025",model_name="m"} 1.0
vllm:time_per_output_token_seconds_bucket{engine="0",le="0.05",model_name="m"} 41.0
vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 51.0
vllm:time_per_output_token_seconds_count{engine="0",model_name="m"} 51.0
vllm:time_per_output_token_seconds_sum{engine="0",model_name="m"} 1.6
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.05",model_name="m"} 40.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 50.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 50.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 1.5
"""


def _sched(dp: str, tp: str) -> str:
    return (
        f'dp_rank="{dp}",engine_type="unified",model_name="deepseek-ai/DeepSeek-V3",'
        f'moe_ep_rank="{tp}",pp_rank="0",tp_rank="{tp}"'
    )


TOK = 'engine_type="unified",model_name="deepseek-ai/DeepSeek-V3"'

# DP attention, dp=2 x tp=2: each DP rank's two TP ranks report the same scheduler state.
SGLANG = f"""\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{{_sched("0", "0")}}} 12.0
sglang:num_running_reqs{{{_sched("0", "1")}}} 12.0
sglang:num_running_reqs{{{_sched("1", "2")}}} 7.0
sglang:num_running_reqs{{{_sched("1", "3")}}} 7.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{{_sched("0", "0")}}} 3.0
sglang:num_queue_reqs{{{_sched("0", "1")}}} 3.0
sglang:num_queue_reqs{{{_sched("1", "2")}}} 1.0
sglang:num_queue_reqs{{{_sched("1", "3")}}} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{{_sched("0", "0")}}} 0.4
sglang:token_usage{{{_sched("0", "1")}}} 0.4
sglang:token_usage{{{_sched("1", "2")}}} 0.6
sglang:token_usage{{{_sched("1", "3")}}} 0.6
# HELP sglang:queue_time_seconds Histogram of queueing time in seconds.
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{{{_sched("0", "0")},le="0.5"}} 90.0
sglang:queue_time_seconds_bucket{{{_sched("0", "1")},le="0.5"}} 90.0
sglang:queue_time_seconds_bucket{{{_sched("0", "0")},le="+Inf"}} 100.0
sglang:queue_time_seconds_bucket{{{_sched("0", "1")},le="+Inf"}} 100.0
sglang:queue_time_seconds_count{{{_sched("0", "0")}}} 100.0
sglang:queue_time_seconds_count{{{_sched("0", "1")}}} 100.0
sglang:queue_time_seconds_sum{{{_sched("0", "0")}}} 12.0
sglang:queue_time_seconds_sum{{{_sched("0", "1")}}} 12.0
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{{{TOK},is_streaming="true"}} 300.0
sglang:num_requests_total{{{TOK},is_streaming="false"}} 200.0
# HELP sglang:num_aborted_requests_total Number of requests aborted.
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{{{TOK}}} 11.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{{TOK},is_streaming="true"}} 5000.0
sglang:prompt_tokens_total{{{TOK},is_streaming="false"}} 4000.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{{TOK},is_streaming="true"}} 3000.0
sglang:generation_tokens_total{{{TOK},is_streaming="false"}} 1500.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{{TOK},le="0.1"}} 100.0
sglang:time_to_first_token_seconds_bucket{{{TOK},le="0.5"}} 400.0
sglang:time_to_first_token_seconds_bucket{{{TOK},le="+Inf"}} 500.0
sglang:time_to_first_token_seconds_count{{{TOK}}} 500.0
sglang:time_to_first_token_seconds_sum{{{TOK}}} 95.5
# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE sglang:inter_token_latency_seconds histogram
sglang:inter_token_latency_seconds_bucket{{{TOK},le="0.02"}} 1000.0
sglang:inter_token_latency_seconds_bucket{{{TOK},le="+Inf"}} 1200.0
sglang:inter_token_latency_seconds_count{{{TOK}}} 1200.0
sglang:inter_token_latency_seconds_sum{{{TOK}}} 30.0
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{{TOK},le="10.0"}} 480.0
sglang:e2e_request_latency_seconds_bucket{{{TOK},le="+Inf"}} 500.0
sglang:e2e_request_latency_seconds_count{{{TOK}}} 500.0
sglang:e2e_request_latency_seconds_sum{{{TOK}}} 2100.0
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{{{_sched("0", "0")}}} 812.5
"""

# SGLang as of PR #1853 (2024-11): a single `name` label.
SGLANG_EARLY = """\
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{name="meta-llama/Llama-3.1-8B"} 2.0
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{name="meta-llama/Llama-3.1-8B"} 0.0625
"""

TGI = """\
# TYPE tgi_request_count counter
tgi_request_count 120
# TYPE tgi_request_success counter
tgi_request_success 100
# TYPE tgi_request_failure counter
tgi_request_failure{err="validation"} 12
tgi_request_failure{err="overloaded"} 5
tgi_request_failure{err="generation"} 3
# TYPE tgi_queue_size gauge
tgi_queue_size 4
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 16
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 8192
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="100"} 40
tgi_request_input_length_bucket{le="+Inf"} 100
tgi_request_input_length_sum 23456
tgi_request_input_length_count 100
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="100"} 70
tgi_request_generated_tokens_bucket{le="+Inf"} 100
tgi_request_generated_tokens_sum 7890
tgi_request_generated_tokens_count 100
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.5"} 10
tgi_request_duration_bucket{le="2"} 80
tgi_request_duration_bucket{le="+Inf"} 100
tgi_request_duration_sum 150.25
tgi_request_duration_count 100
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{le="0.01"} 90
tgi_request_queue_duration_bucket{le="+Inf"} 100
tgi_request_queue_duration_sum 0.9
tgi_request_queue_duration_count 100
# TYPE tgi_request_mean_time_per_token_duration histogram
tgi_request_mean_time_per_token_duration_bucket{le="0.05"} 95
tgi_request_mean_time_per_token_duration_bucket{le="+Inf"} 100
tgi_request_mean_time_per_token_duration_sum 3.2
tgi_request_mean_time_per_token_duration_count 100
# TYPE tgi_batch_inference_duration histogram
tgi_batch_inference_duration_bucket{method="prefill",le="+Inf"} 20
tgi_batch_inference_duration_sum{method="prefill"} 1.5
tgi_batch_inference_duration_count{method="prefill"} 20
"""
