"""The memory planner (seed 004 §4.2, troubleshooting row 1) and the node count (seed 000 §3.1)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from worker.cli import register
from worker.config import WorkerConfig
from worker.model_catalog import CATALOG
from worker.planner import GIB, MemoryPlan, find_gpu, kv_bytes_per_value, plan_capacity, plan_memory
from worker.shapes import BYTES_PER_PARAM, REFERENCE_SHAPES

SEVEN_B = REFERENCE_SHAPES["ref-7b"]


def run_cli(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out, err)
    return code, out.getvalue(), err.getvalue()


def test_seven_b_in_16_bit_is_about_14_gb_plus_a_linear_kv_cache() -> None:
    gpu = find_gpu("H100 80GB")
    plan = plan_memory(SEVEN_B, precision="bf16", tensor_parallel_size=1, max_context_length=8192, max_batch_size=32,
                       device=gpu.name, total_bytes=gpu.memory_bytes)
    assert 13.9e9 < plan.weight_bytes < 14.0e9  # "70亿参数的模型以16位浮点加载约需14GB"
    # 2 x layers x kv_heads x head_dim x bytes x context x batch
    assert plan.kv_bytes == 2 * 32 * 8 * 128 * 2 * 8192 * 32
    assert plan.fits and not plan.suggestions
    half = plan_memory(SEVEN_B, precision="bf16", tensor_parallel_size=1, max_context_length=4096, max_batch_size=32,
                       device=gpu.name, total_bytes=gpu.memory_bytes)
    assert half.kv_bytes * 2 == plan.kv_bytes  # linear in context


def test_a_config_that_does_not_fit_gets_fixes_that_fit() -> None:
    gpu = find_gpu("L4")
    kwargs = {"tensor_parallel_size": 1, "device": gpu.name, "total_bytes": gpu.memory_bytes}
    plan = plan_memory(SEVEN_B, precision="bf16", max_context_length=8192, max_batch_size=32, **kwargs)  # type: ignore[arg-type]
    assert not plan.fits
    fixes = {s.field: s.value for s in plan.suggestions}
    assert set(fixes) >= {"max_batch_size", "max_context_length", "tensor_parallel_size"}
    assert plan_memory(SEVEN_B, precision="bf16", max_context_length=8192, max_batch_size=int(fixes["max_batch_size"]),
                       **kwargs).fits  # type: ignore[arg-type]
    assert not plan_memory(SEVEN_B, precision="bf16", max_context_length=8192,
                           max_batch_size=int(fixes["max_batch_size"]) + 1, **kwargs).fits  # type: ignore[arg-type]
    assert plan_memory(SEVEN_B, precision="bf16", max_context_length=int(fixes["max_context_length"]),
                       max_batch_size=32, **kwargs).fits  # type: ignore[arg-type]
    assert "max_batch_size: " in plan.refusal() and "does not fit" in plan.refusal()
    # weights alone too big: only precision or parallelism can help
    tiny = plan_memory(SEVEN_B, precision="fp32", max_context_length=512, max_batch_size=1, tensor_parallel_size=1,
                       device="16 GiB", total_bytes=16 * GIB)
    assert {s.field for s in tiny.suggestions} == {"precision", "tensor_parallel_size"}
    assert next(s.value for s in tiny.suggestions if s.field == "precision") == "bf16"


def test_node_count_for_a_peak_load() -> None:
    gpu = find_gpu("h100-80gb")
    cap = plan_capacity(SEVEN_B, precision="bf16", tensor_parallel_size=1, batch=32, gpu=gpu, peak_qps=50)
    assert cap.replicas_per_node == 8
    assert cap.nodes == max(1, -(-50 // cap.node_rps)) == 1
    assert plan_capacity(SEVEN_B, precision="bf16", tensor_parallel_size=1, batch=32, gpu=gpu,
                         peak_qps=cap.node_rps * 3.5).nodes == 4
    tp2 = plan_capacity(SEVEN_B, precision="bf16", tensor_parallel_size=2, batch=32, gpu=gpu, peak_qps=50)
    assert tp2.replicas_per_node == 4 and tp2.step_s < cap.step_s
    measured = plan_capacity(SEVEN_B, precision="bf16", tensor_parallel_size=1, batch=32, gpu=gpu, peak_qps=50,
                             measured_replica_rps=0.5)  # what `evaluate` measured beats the roofline
    assert measured.node_rps == 4.0 and measured.nodes == 13
    assert any("0.50 req/s measured (the roofline estimates" in line for line in measured.lines)


def test_plan_command_prints_the_arithmetic_and_nodes() -> None:
    code, out, _ = run_cli("plan", "--model", "ref-7b", "--precision", "bf16", "--gpu", "H100 80GB", "--peak-qps", "50")
    assert code == 0
    assert "weights  = 6,981,709,824 params x 2 B = 13.00 GiB" in out
    assert "KV cache = 2 x layers x kv_heads x head_dim x 2 B = 128.0 KiB/token x context 8192 x batch 32" in out
    assert "-> fits" in out and "nodes = ceil(peak 50 req/s" in out
    code, out, _ = run_cli("plan", "--model", "ref-7b", "--gpu", "L4 24GB")
    assert code == 1 and "DOES NOT FIT" in out and "max_batch_size: 7" in out
    code, _, err = run_cli("plan", "--model", "ref-9000", "--gpu", "L4")
    assert code == 2 and "ref-9000" in err


def test_worker_refuses_a_config_that_does_not_fit_this_host(model_dir: object) -> None:
    from worker.runtime import WorkerRuntime

    # 3 GiB of KV cache per sequence: a batch of 4096 fits nowhere, one sequence fits any test host
    config = WorkerConfig(model_path="ref-small", max_context_length=131_072, max_batch_size=4096,
                          model_dir=str(model_dir))
    failures: list[str] = []
    runtime = WorkerRuntime(config, lambda events: None, on_failed=failures.append)
    runtime.load()
    assert runtime.state == "failed"
    assert failures and failures[0] == runtime.error
    assert "does not fit" in runtime.error and "max_batch_size: " in runtime.error
    assert "max_context_length: " in runtime.error


def test_a_70b_in_bf16_is_refused_on_one_h100_and_fits_with_tensor_parallel_4() -> None:
    shape, gpu = CATALOG["llama-3.1-70b"].shape, find_gpu("H100 80GB")

    def plan(tp: int) -> MemoryPlan:
        return plan_memory(shape, precision="bf16", tensor_parallel_size=tp, max_context_length=8192,
                           max_batch_size=32, device=gpu.name, total_bytes=gpu.memory_bytes)

    one = plan(1)
    assert not one.fits
    assert one.weight_bytes == shape.param_count() * 2 > gpu.memory_bytes  # the weights alone: no batch/context fix
    fixes = {s.field: s.value for s in one.suggestions}
    assert "max_batch_size" not in fixes and "max_context_length" not in fixes
    # The suggestion is the smallest tensor-parallel size whose plan fits (2 does not: 65.7 GiB of
    # weights + 40 GiB of KV cache + margin exceed 79.6 GiB).
    smallest = next(tp for tp in (2, 4, 8, 16) if plan(tp).fits)
    assert fixes["tensor_parallel_size"] == smallest == 4
    assert plan(4).kv_bytes == one.kv_bytes / 4 and plan(4).weight_bytes == one.weight_bytes / 4

    code, out, _ = run_cli("plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--precision", "bf16",
                           "--gpu", "H100 80GB")
    assert code == 1 and "DOES NOT FIT" in out and "tensor_parallel_size: 4" in out
    assert f"weights  = {shape.param_count():,} params x 2 B" in out
    code, out, _ = run_cli("plan", "--model", "llama-3.1-70b", "--precision", "bf16", "--gpu", "H100 80GB",
                           "--tensor-parallel-size", "4", "--peak-qps", "10")
    assert code == 0 and "-> fits" in out and "nodes = ceil(peak 10 req/s" in out


def test_moe_memory_holds_every_expert_but_decode_reads_the_routed_ones() -> None:
    shape, gpu = CATALOG["mixtral-8x7b"].shape, find_gpu("H100 80GB")
    mem = plan_memory(shape, precision="bf16", tensor_parallel_size=2, max_context_length=4096, max_batch_size=8,
                      device=gpu.name, total_bytes=gpu.memory_bytes)
    assert mem.weight_bytes == shape.param_count() * 2 / 2
    assert "(MoE: all 8 experts resident; 12.88 B active per token)" in "\n".join(mem.lines())
    for batch in (1, 64):
        cap = plan_capacity(shape, precision="bf16", tensor_parallel_size=2, batch=batch, gpu=gpu, peak_qps=1,
                            prompt_tokens=512, output_tokens=256)
        kv = shape.kv_bytes_per_token(kv_bytes_per_value("bf16")) * batch * (512 + 128)
        bandwidth = 2 * gpu.bandwidth_bytes_s * 0.6
        read = shape.params_read_per_step(batch) * BYTES_PER_PARAM["bf16"]
        flops = 2 * gpu.bf16_flops * 0.4
        assert cap.step_s == pytest.approx(max((read + kv) / bandwidth, 2 * shape.params_per_token() * batch / flops))
        assert cap.prefill_s == pytest.approx(2 * shape.params_per_token() * 512 / flops)
    # batch 1 reads 2 of 8 experts per layer: about a quarter of the weights, not all of them
    one = plan_capacity(shape, precision="bf16", tensor_parallel_size=2, batch=1, gpu=gpu, peak_qps=1)
    assert one.step_s < 0.3 * shape.param_count() * 2 / (2 * gpu.bandwidth_bytes_s * 0.6)
    assert "MoE: 2 of 8 routed experts per token" in "\n".join(one.lines)


def test_deepseek_v3_plans_in_fp8_with_an_mla_cache_on_every_device() -> None:
    shape = CATALOG["deepseek-v3"].shape
    code, out, _ = run_cli("plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200 141GB",
                           "--tensor-parallel-size", "8")
    assert "precision fp8 (1 bytes/param)" in out  # auto: the released FP8 weights
    assert "kv_lora_rank 512 + qk_rope_head_dim 64" in out and "whole on each of the tp 8 devices" in out
    gpu = find_gpu("H200")
    mem = plan_memory(shape, precision="fp8", tensor_parallel_size=8, max_context_length=8192, max_batch_size=32,
                      device=gpu.name, total_bytes=gpu.memory_bytes)
    assert mem.kv_bytes_per_token == 61 * 576 * 2  # not divided by 8
    assert mem.weight_bytes == shape.param_count() / 8
    assert code == (0 if mem.fits else 1)


def test_plan_refuses_a_tensor_parallel_size_the_heads_cannot_split(tmp_path: Path) -> None:
    code, _, err = run_cli("plan", "--model", "llama-3.1-8b", "--gpu", "H100", "--tensor-parallel-size", "3")
    assert code == 2 and "tensor_parallel_size 3" in err
    # a checkpoint directory still works, now with any Llama 3.1 config.json (rope_scaling included)
    config = {**CATALOG["llama-3.1-8b"].config, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    code, out, _ = run_cli("plan", "--model", str(tmp_path), "--gpu", "H100")
    assert code == 0 and "8.030 B parameters" in out


@pytest.mark.parametrize("name", ["H100", "A100 40GB", "l40s", "MI300X"])
def test_gpu_catalogue_lookup(name: str) -> None:
    assert find_gpu(name).memory_bytes > 20 * GIB
    with pytest.raises(ValueError, match="unknown GPU"):
        find_gpu("Voodoo 2")
