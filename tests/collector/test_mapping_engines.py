"""Canonical mapping, engine by engine, on hand-written fixtures with hand-checked values."""

from __future__ import annotations

import pytest

from store.types import SeriesKey
from tests.collector.mapping_fixtures import (
    DCGM_MASTER,
    DCGM_OLD_NAMESPACE,
    DCGM_RELEASED,
    GPU_A,
    SGLANG,
    SGLANG_EARLY,
    TGI,
    TRITON,
    UUID0,
    UUID1,
    VLLM_TRANSITION,
    VLLM_V0,
    VLLM_V1,
    canon,
)


def k(name: str, **labels: str) -> str:
    return SeriesKey.of(name, labels).canonical()


def hist(name: str, buckets: dict[str, float], count: float, total: float, **labels: str) -> dict[str, float]:
    out = {k(f"{name}_bucket", le=le, **labels): v for le, v in buckets.items()}
    out[k(f"{name}_count", **labels)] = count
    out[k(f"{name}_sum", **labels)] = total
    return out


# --- vLLM -------------------------------------------------------------------------------------

QWEN = {"engine": "vllm", "model": "Qwen/Qwen2.5-7B-Instruct"}


def test_vllm_v1_full_mapping() -> None:
    expected = {
        k("inference_requests_running", **QWEN): 8.0,  # 5 + 3 over the two DP engine cores
        k("inference_requests_waiting", **QWEN): 2.0,  # 2 + 0
        k("inference_kv_cache_usage_ratio", **QWEN): 0.5,  # mean(0.25, 0.75): a fraction, no /100
        k("inference_prompt_tokens_total", **QWEN): 12345.0,  # 10000 + 2345
        k("inference_generation_tokens_total", **QWEN): 5000.0,  # 4000 + 1000
        # stop+length+repetition: 100+20+1 + 50+5+0; "timeout" (unknown reason) is not counted
        k("inference_requests_total", outcome="success", **QWEN): 176.0,
        k("inference_requests_total", outcome="abort", **QWEN): 10.0,  # 7 + 3
        k("inference_requests_total", outcome="failure", **QWEN): 2.0,  # error: 2 + 0
        **hist(
            "inference_time_to_first_token_seconds",
            {"0.01": 1.0, "0.1": 6.0, "1.0": 14.0, "+Inf": 15.0},  # engine 0 + engine 1, per le
            15.0,
            3.75,
            **QWEN,
        ),
        **hist(
            "inference_inter_token_latency_seconds",
            {"0.01": 30.0, "0.05": 90.0, "+Inf": 100.0},
            100.0,
            2.0,
            **QWEN,
        ),
        **hist("inference_e2e_request_latency_seconds", {"1.0": 3.0, "+Inf": 10.0}, 10.0, 25.5, **QWEN),
        # 5xx summed over method (POST 4 + GET 2); exact code 503 accepted; 2xx and /metrics not
        k("inference_http_server_errors_total", engine="vllm", handler="/v1/chat/completions"): 6.0,
        k("inference_http_server_errors_total", engine="vllm", handler="/v1/completions"): 1.0,
    }
    assert canon(VLLM_V1) == expected


def test_vllm_v0_deprecated_names_map() -> None:
    opt = {"engine": "vllm", "model": "facebook/opt-125m"}
    assert canon(VLLM_V0) == {
        k("inference_requests_running", **opt): 1.0,
        k("inference_kv_cache_usage_ratio", **opt): 0.125,  # vllm:gpu_cache_usage_perc, 0..1
        **hist("inference_inter_token_latency_seconds", {"0.025": 6.0, "+Inf": 8.0}, 8.0, 0.16, **opt),
        k("inference_requests_total", outcome="success", **opt): 7.0,  # length 3 + stop 4
    }


def test_vllm_new_name_wins_when_both_are_exported() -> None:
    m = {"engine": "vllm", "model": "m"}
    out = canon(VLLM_TRANSITION)
    assert out == {
        k("inference_kv_cache_usage_ratio", **m): 0.5,  # not 0.9 (deprecated) nor their mean
        **hist("inference_inter_token_latency_seconds", {"0.05": 40.0, "+Inf": 50.0}, 50.0, 1.5, **m),
    }
    # the deprecated histogram's extra bucket (le=0.025) must not leak into the canonical one
    assert not any('le="0.025"' in key for key in out)


# --- SGLang -----------------------------------------------------------------------------------

DSV3 = {"engine": "sglang", "model": "deepseek-ai/DeepSeek-V3"}


def test_sglang_mapping() -> None:
    assert canon(SGLANG) == {
        # TP ranks of one DP rank repeat its value: averaged; DP ranks summed: 12 + 7
        k("inference_requests_running", **DSV3): 19.0,
        k("inference_requests_waiting", **DSV3): 4.0,  # 3 + 1
        k("inference_kv_cache_usage_ratio", **DSV3): 0.5,  # mean over DP of 0.4 and 0.6
        **hist("inference_queue_time_seconds", {"0.5": 90.0, "+Inf": 100.0}, 100.0, 12.0, **DSV3),
        # success = num_requests_total (300 + 200 over is_streaming) - aborted 11
        k("inference_requests_total", outcome="success", **DSV3): 489.0,
        k("inference_requests_total", outcome="abort", **DSV3): 11.0,
        k("inference_prompt_tokens_total", **DSV3): 9000.0,
        k("inference_generation_tokens_total", **DSV3): 4500.0,
        **hist(
            "inference_time_to_first_token_seconds",
            {"0.1": 100.0, "0.5": 400.0, "+Inf": 500.0},
            500.0,
            95.5,
            **DSV3,
        ),
        **hist(
            "inference_inter_token_latency_seconds", {"0.02": 1000.0, "+Inf": 1200.0}, 1200.0, 30.0, **DSV3
        ),
        **hist(
            "inference_e2e_request_latency_seconds", {"10.0": 480.0, "+Inf": 500.0}, 500.0, 2100.0, **DSV3
        ),
    }


def test_sglang_early_name_label_becomes_model() -> None:
    llama = {"engine": "sglang", "model": "meta-llama/Llama-3.1-8B"}
    assert canon(SGLANG_EARLY) == {
        k("inference_requests_running", **llama): 2.0,
        k("inference_kv_cache_usage_ratio", **llama): 0.0625,
    }


def test_sglang_aborted_alone_does_not_make_negative_success() -> None:
    body = 'sglang:num_aborted_requests_total{model_name="x"} 4.0\n'
    assert canon(body, "sglang") == {
        k("inference_requests_total", engine="sglang", model="x", outcome="abort"): 4.0
    }


# --- TGI --------------------------------------------------------------------------------------


def test_tgi_suffixless_counters_and_histograms() -> None:
    t = {"engine": "tgi"}  # one model per server: no model label
    assert canon(TGI) == {
        k("inference_requests_total", outcome="success", **t): 100.0,  # tgi_request_success
        k("inference_requests_total", outcome="failure", **t): 20.0,  # 12 + 5 + 3 over err
        k("inference_requests_waiting", **t): 4.0,
        k("inference_requests_running", **t): 16.0,
        k("inference_prompt_tokens_total", **t): 23456.0,  # tgi_request_input_length_sum
        k("inference_generation_tokens_total", **t): 7890.0,  # tgi_request_generated_tokens_sum
        **hist(
            "inference_e2e_request_latency_seconds",
            {"0.5": 10.0, "2": 80.0, "+Inf": 100.0},
            100.0,
            150.25,
            **t,
        ),
        **hist("inference_queue_time_seconds", {"0.01": 90.0, "+Inf": 100.0}, 100.0, 0.9, **t),
        **hist(
            "inference_request_time_per_output_token_seconds", {"0.05": 95.0, "+Inf": 100.0}, 100.0, 3.2, **t
        ),
    }


# --- Triton -----------------------------------------------------------------------------------


def test_triton_mapping() -> None:
    ens = {"engine": "triton", "model": "ensemble", "version": "1"}
    llama = {"engine": "triton", "model": "llama", "version": "1", "uuid": GPU_A}
    trt = {"engine": "triton", "model": "tensorrt_llm", "version": "1"}
    gpu = {"engine": "triton", "uuid": GPU_A}
    assert canon(TRITON) == {
        k("inference_requests_total", outcome="success", **ens): 950.0,
        k("inference_requests_total", outcome="failure", **ens): 7.0,  # OTHER 1 + BACKEND 2 + REJECTED 4
        k("inference_requests_total", outcome="abort", **ens): 3.0,  # CANCELED
        k("inference_requests_total", outcome="success", **llama): 400.0,
        k("inference_requests_total", outcome="failure", **llama): 5.0,  # no reason label (older build)
        k("inference_requests_waiting", **ens): 6.0,
        k("inference_request_duration_seconds_total", **ens): 123.456789,  # us / 1e6
        k("inference_queue_duration_seconds_total", **ens): 2.5,
        k("inference_compute_input_duration_seconds_total", **ens): 0.001,
        k("inference_compute_infer_duration_seconds_total", **ens): 98.765432,
        k("inference_compute_output_duration_seconds_total", **ens): 0.0005,
        # ms histogram: le 100/500/2500 ms -> 0.1/0.5/2.5 s, sum 31250 ms -> 31.25 s, count as is
        **hist(
            "inference_time_to_first_token_seconds",
            {"0.1": 10.0, "0.5": 40.0, "2.5": 48.0, "+Inf": 50.0},
            50.0,
            31.25,
            **ens,
        ),
        k("gpu_utilization_ratio", **gpu): 0.83,
        k("gpu_memory_total_bytes", **gpu): 85899345920.0,
        k("gpu_memory_used_bytes", **gpu): 42949672960.0,
        k("gpu_power_watts", **gpu): 412.5,
        k("gpu_power_limit_watts", **gpu): 700.0,
        k("gpu_energy_joules_total", **gpu): 1234567.5,
        k("inference_requests_running", **trt): 9.0,  # request_type="active"
        k("inference_kv_cache_usage_ratio", **trt): 0.25,  # used 1560 / max 6240
    }


# --- dcgm-exporter ----------------------------------------------------------------------------

A100 = "NVIDIA A100-SXM4-80GB"
GPU0 = {
    "engine": "dcgm",
    "gpu": "0",
    "uuid": UUID0,
    "pci_bus_id": "00000000:3B:00.0",
    "device": "nvidia0",
    "gpu_model": A100,
    "host": "node-a",
}


def test_dcgm_released_units_and_labels() -> None:
    mig = {
        "engine": "dcgm",
        "gpu": "1",
        "uuid": UUID1,
        "pci_bus_id": "00000000:5E:00.0",
        "device": "nvidia1",
        "gpu_model": A100,
        "host": "node-a",
        "GPU_I_PROFILE": "3g.40gb",
    }
    assert canon(DCGM_RELEASED) == {
        k("gpu_sm_clock_hertz", **GPU0): 1410e6,  # MHz * 1e6
        k("gpu_memory_clock_hertz", **GPU0): 1593e6,
        # DCGM_FI_DEV_MEMORY_TEMP 9223372036854775794 is DCGM's "not supported" blank: dropped
        k("gpu_temperature_celsius", **GPU0): 54.0,
        k("gpu_power_watts", **GPU0): 302.206,
        k("gpu_energy_joules_total", **GPU0): 2500.0,  # 2 500 000 mJ / 1000
        k("gpu_pcie_replays_total", **GPU0): 3.0,
        k("gpu_utilization_ratio", **GPU0): 0.87,  # 87 % / 100
        k("gpu_memory_copy_utilization_ratio", **GPU0): 0.45,
        k("gpu_last_xid", **GPU0): 79.0,  # err_code / err_msg dropped
        k("gpu_memory_free_bytes", **GPU0): 59000 * 1048576.0,  # MiB
        k("gpu_memory_used_bytes", **GPU0): 21383 * 1048576.0,
        k("gpu_ecc_errors_total", type="volatile", kind="corrected", **GPU0): 2.0,
        k("gpu_ecc_errors_total", type="aggregate", kind="uncorrected", **GPU0): 1.0,
        k("gpu_throttle_seconds_total", reason="power", **GPU0): 1.5,  # ns / 1e9
        k("gpu_nvlink_errors_total", type="crc_flit", **GPU0): 6.0,
        k("gpu_graphics_engine_active_ratio", **GPU0): 0.912345,  # DCP: already a ratio
        # MIG instances stay apart; empty k8s labels (older exporters) are dropped
        k("gpu_graphics_engine_active_ratio", GPU_I_ID="1", **mig): 0.5,
        k(
            "gpu_graphics_engine_active_ratio",
            GPU_I_ID="2",
            container="vllm",
            namespace="llm",
            pod="vllm-7",
            **mig,
        ): 0.25,
        k("gpu_pcie_tx_bytes_per_second", **GPU0): 123456789.0,
    }


def test_dcgm_master_lowercase_hostname() -> None:
    labels = {**GPU0, "host": "node-b"}
    assert canon(DCGM_MASTER) == {
        k("gpu_memory_used_bytes", **labels): 1024 * 1048576.0,
        k("gpu_utilization_ratio", **labels): 1.0,
    }


def test_dcgm_hostname_spellings_give_the_same_series() -> None:
    line = 'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="GPU-1",device="nvidia0",modelName="L4",{host}="n1"}} 40\n'
    old = canon(line.format(host="Hostname"), "dcgm")
    new = canon(line.format(host="hostname"), "dcgm")
    assert (
        old
        == new
        == {
            k(
                "gpu_temperature_celsius",
                engine="dcgm",
                gpu="0",
                uuid="GPU-1",
                device="nvidia0",
                gpu_model="L4",
                host="n1",
            ): 40.0
        }
    )


def test_dcgm_driver_upgrade_keeps_the_series() -> None:
    line = 'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="GPU-1",DCGM_FI_DRIVER_VERSION="{v}",DCGM_FI_PROCESS_NAME="/x"}} 40\n'
    assert canon(line.format(v="550.54.15"), "dcgm") == canon(line.format(v="570.86.15"), "dcgm")


def test_dcgm_old_namespace_is_recognised_but_not_mapped() -> None:
    assert canon(DCGM_OLD_NAMESPACE) == {}


@pytest.mark.parametrize(
    ("value", "mapped"),
    [
        ("9223372036854775794", False),
        ("140737488355328", False),
        ("140737488355330", False),
        ("2147483632", True),
    ],
)
def test_dcgm_blank_sentinels(value: str, mapped: bool) -> None:
    body = f'DCGM_FI_DEV_MEMORY_TEMP{{gpu="0"}} {value}\n'
    assert bool(canon(body, "dcgm")) is mapped


def test_dcgm_memory_temperature_zero_means_no_sensor() -> None:
    """GPUs without an HBM temperature sensor (L4, A10, consumer cards) report MEMORY_TEMP 0:
    that is no reading, not 0 °C; the GPU temperature's 0 stays a value, and so does a real
    memory temperature."""
    body = (
        'DCGM_FI_DEV_MEMORY_TEMP{gpu="0",modelName="NVIDIA L4"} 0\n'
        'DCGM_FI_DEV_MEMORY_TEMP{gpu="1",modelName="NVIDIA H100 80GB HBM3"} 41\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",modelName="NVIDIA L4"} 0\n'
    )
    assert canon(body, "dcgm") == {
        k("gpu_memory_temperature_celsius", engine="dcgm", gpu="1", gpu_model="NVIDIA H100 80GB HBM3"): 41.0,
        k("gpu_temperature_celsius", engine="dcgm", gpu="0", gpu_model="NVIDIA L4"): 0.0,
    }
