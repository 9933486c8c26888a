"""The catalogue of published model shapes (worker/model_catalog.py) and the shape arithmetic it needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.model_catalog import (
    CATALOG,
    MODELS,
    CatalogModel,
    find_model,
    get_model,
    known_names,
    shape_from_config,
)
from worker.shapes import REFERENCE_SHAPES, shape_for


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_parameter_counts_land_within_2_percent_of_the_model_card(model: CatalogModel) -> None:
    shape = model.shape
    assert shape.param_count() == pytest.approx(model.published, rel=0.02)
    if model.published_active is None:
        assert not shape.is_moe and shape.active_param_count() == shape.param_count()
    else:
        assert shape.is_moe and shape.active_param_count() == pytest.approx(model.published_active, rel=0.02)
        assert shape.active_param_count() < shape.param_count() / 2


def test_exact_counts_of_the_published_safetensors() -> None:
    # The parameter totals Hugging Face reports for these checkpoints' safetensors.
    assert CATALOG["llama-3.1-8b"].shape.param_count() == 8_030_261_248
    assert CATALOG["llama-3.1-70b"].shape.param_count() == 70_553_706_496
    assert CATALOG["llama-3.1-405b"].shape.param_count() == 405_853_388_800
    assert CATALOG["mixtral-8x7b"].shape.param_count() == 46_702_792_704


def test_kv_cache_per_token_gqa_and_mla() -> None:
    llama = CATALOG["llama-3.1-70b"].shape
    assert llama.kv_bytes_per_token(2) == 2 * 80 * 8 * 128 * 2
    assert llama.kv_bytes_per_token_per_device(2, 4) == llama.kv_bytes_per_token(2) / 4
    big = CATALOG["llama-3.1-405b"].shape  # 8 KV heads over 16 devices: one (replicated) head each
    assert big.tp_supported(16) and not big.tp_supported(3)
    assert big.kv_bytes_per_token_per_device(2, 16) == big.kv_bytes_per_token(2) / 8
    qwen3 = CATALOG["qwen3-32b"].shape  # head_dim 128 with 64 heads over a 5120 hidden size
    assert qwen3.q_size == 8192 and qwen3.kv_bytes_per_token(2) == 2 * 64 * 8 * 128 * 2
    ds = CATALOG["deepseek-v3"].shape
    assert ds.uses_mla and ds.kv_values_per_token() == 61 * (512 + 64)
    assert ds.kv_bytes_per_token(2) == 70_272  # vs 2 x 61 x 128 heads x 192 x 2 B for per-head K and V
    assert ds.kv_bytes_per_token_per_device(2, 8) == ds.kv_bytes_per_token(2)  # the latent is not split by head


def test_moe_structure_and_what_a_decode_step_reads() -> None:
    ds = CATALOG["deepseek-v3"].shape
    assert (ds.num_experts, ds.num_shared_experts, ds.experts_per_token, ds.num_dense_layers) == (256, 1, 8, 3)
    assert ds.storage == "fp8"
    # DeepSeek's weight notes: 36.6 B activated parameters in the main model (the output head included).
    assert ds.params_read_per_step(1) == pytest.approx(36.6e9, rel=0.02)
    assert ds.expected_experts_read(1) == pytest.approx(8)
    assert ds.params_read_per_step(4096) == pytest.approx(ds.param_count() - ds.vocab_size * ds.hidden_size, rel=1e-3)
    mixtral = CATALOG["mixtral-8x7b"].shape
    assert mixtral.num_dense_layers == 0 and mixtral.moe_intermediate_size == 14336
    assert mixtral.params_read_per_step(1) < 0.3 * mixtral.param_count()
    assert mixtral.params_read_per_step(1) < mixtral.params_read_per_step(8) < mixtral.params_read_per_step(64)
    assert CATALOG["qwen3-30b-a3b"].shape.num_dense_layers == 0
    with pytest.raises(ValueError, match="plan-only"):
        mixtral.to_hf_config()


@pytest.mark.parametrize("name", [
    "meta-llama/Llama-3.1-70B-Instruct", "META-LLAMA/llama-3.1-70b", "Llama-3.1-70B-Instruct", "llama-3.1-70b",
    "Llama 3.1 70B", "meta-llama/Meta-Llama-3.1-70B-Instruct",
])
def test_names_hub_ids_and_aliases_in_any_case(name: str) -> None:
    model = find_model(name)
    assert model is not None and model.name == "llama-3.1-70b"
    assert shape_for(name).param_count() == model.shape.param_count()


def test_every_entry_answers_to_its_names() -> None:
    for model in MODELS:
        for name in model.names():
            assert find_model(name) is model
            assert find_model(name.upper()) is model
    assert find_model("Qwen/Qwen3-30B-A3B").name == "qwen3-30b-a3b"  # type: ignore[union-attr]
    assert find_model("deepseek-ai/DeepSeek-V3-0324").name == "deepseek-v3"  # type: ignore[union-attr]


def test_an_unknown_name_lists_the_known_ones_closest_first() -> None:
    with pytest.raises(ValueError, match="unknown model 'llama-3.1-7b'") as info:
        get_model("llama-3.1-7b")
    listed = str(info.value).split("closest first): ")[1].split(", ")
    assert sorted(listed) == sorted(CATALOG)
    assert listed[0].startswith("llama-3.1-")
    assert known_names("Qwen/Qwen3-30B-A3B-Instruct-2507")[0] == "qwen3-30b-a3b"
    assert known_names("mixtral-8x7b-instruct-v0.2")[0] == "mixtral-8x7b"
    with pytest.raises(ValueError, match="closest first\\): mixtral-8x7b"):
        shape_for("mixtral-7x8b")


def test_shape_for_still_takes_reference_names_and_directories(tmp_path: Path) -> None:
    assert shape_for("ref-7b") is REFERENCE_SHAPES["ref-7b"]
    for name in ("mixtral-8x22b", "deepseek-v3", "qwen3-235b-a22b", "qwen2.5-72b"):
        directory = tmp_path / name
        directory.mkdir()
        (directory / "config.json").write_text(json.dumps(CATALOG[name].config), encoding="utf-8")
        from_dir = shape_for(str(directory))
        assert from_dir.param_count() == CATALOG[name].shape.param_count()
        assert from_dir.kv_bytes_per_token(2) == CATALOG[name].shape.kv_bytes_per_token(2)
    # A real Llama 3.1 config.json (rope_scaling and all), which the engine's parser refuses.
    llama = {**CATALOG["llama-3.1-8b"].config, "architectures": ["LlamaForCausalLM"],
             "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps(llama), encoding="utf-8")
    assert shape_for(str(tmp_path / "llama")).param_count() == 8_030_261_248
    with pytest.raises(ValueError, match="model_type 'gemma2' is not one plan can size"):
        shape_from_config({"model_type": "gemma2"}, "g")
