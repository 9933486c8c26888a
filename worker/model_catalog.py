"""Shapes of common open models by name, so ``infermeter plan --model NAME`` needs no config.json.

Every figure below is copied, under the same key, from the model's ``config.json`` on its
Hugging Face hub page (``https://huggingface.co/<hub id>/blob/main/config.json``, the first hub
id of each entry), and becomes a :class:`~worker.shapes.ModelShape` through
:func:`shape_from_config` -- the same function ``plan`` applies to a checkpoint directory's
``config.json``.  ``published`` is the total parameter count of the model card (and
``published_active`` the activated count of an MoE); the tests check that the count computed
from the shape lands within 2 % of both.

Names: a hub id (``meta-llama/Llama-3.1-70B-Instruct``), the part after its slash, or the short
alias (``llama-3.1-70b``); case, spaces, dots, dashes and underscores are ignored.

What the shapes model, and how:

* Llama 3.x, Qwen2.5, Qwen3, Mixtral: grouped-query attention; KV cache per token =
  2 x layers x num_key_value_heads x head_dim values.  Qwen2.5's q/k/v biases and Qwen3's q/k
  RMSNorm weights are counted.
* Mixtral, Qwen3-MoE, DeepSeek-V3: mixture of experts.  Every expert is resident, so memory
  uses the total parameters; a token runs ``num_experts_per_tok`` routed experts (plus
  DeepSeek's shared one), so the decode roofline reads only the experts a batch is routed to.
* DeepSeek-V3: multi-head latent attention (MLA).  Per token and layer the cache holds one
  compressed KV latent (``kv_lora_rank`` 512) and one RoPE key shared by all heads
  (``qk_rope_head_dim`` 64): 576 values, where per-head K (192) and V (128) for 128 heads would
  be 40,960.  The latent is not split by head, so under tensor parallelism every device caches
  all of it (as vLLM's MLA does).  The released weights are FP8 (``quantization_config``), so
  ``plan`` defaults it to fp8.  The multi-token-prediction layer (``num_nextn_predict_layers``,
  about 11.5 B more, for speculative decoding only) is not counted, as in the card's 671 B.

Not modelled: sliding-window attention (none of these use it), vision towers, rope scaling
(it changes no size).  Instruct variants share their base model's shape; Mixtral-8x22B-Instruct
has 768 more vocabulary rows (32,768), under 0.01 % of its parameters.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from worker.shapes import HF_DTYPE, ModelShape

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3")


def _int(config: Mapping[str, Any], *keys: str, default: int = 0) -> int:
    for key in keys:
        value = config.get(key)
        if value is not None:
            return int(value)
    return default


def _dense_layers(config: Mapping[str, Any], model_type: str, layers: int) -> int:
    """How many layers of an MoE model keep a dense MLP (DeepSeek's first_k_dense_replace and
    moe_layer_freq; Qwen-MoE's mlp_only_layers and decoder_sparse_step)."""
    if model_type.startswith("deepseek"):
        first, freq = _int(config, "first_k_dense_replace"), _int(config, "moe_layer_freq", default=1)
        return sum(1 for i in range(layers) if i < first or i % freq)
    if model_type == "qwen3_moe":
        only = {int(i) for i in config.get("mlp_only_layers") or ()}
        step = _int(config, "decoder_sparse_step", default=1)
        return sum(1 for i in range(layers) if i in only or (i + 1) % step)
    return 0


def _storage(config: Mapping[str, Any]) -> str:
    quant = config.get("quantization_config") or {}
    if isinstance(quant, Mapping) and str(quant.get("quant_method", "")).lower() == "fp8":
        return "fp8"
    torch_dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return {v: k for k, v in HF_DTYPE.items()}.get(torch_dtype, "bf16")


def shape_from_config(config: Mapping[str, Any], name: str) -> ModelShape:
    """The sizes of a Hugging Face ``config.json`` of one of :data:`SUPPORTED_MODEL_TYPES`, for
    planning only (unlike :meth:`ModelShape.from_hf_config`, which the engine uses, it accepts
    rope scaling, biases, MoE and MLA); raises ValueError naming what it cannot size."""
    model_type = str(config.get("model_type") or "")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"{name}: model_type {model_type or None!r} is not one plan can size "
            f"({', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    try:
        layers = int(config["num_hidden_layers"])
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        vocab = int(config["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{name}: config.json lacks a usable {exc}") from None
    experts = _int(config, "n_routed_experts", "num_local_experts", "num_experts")
    kv_lora = _int(config, "kv_lora_rank")
    nope, rope = _int(config, "qk_nope_head_dim"), _int(config, "qk_rope_head_dim")
    return ModelShape(
        name=name,
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=_int(config, "num_key_value_heads", default=heads),
        intermediate_size=_int(config, "intermediate_size"),
        vocab_size=vocab,
        head_dim=nope + rope if kv_lora else _int(config, "head_dim"),
        rope_theta=float(config.get("rope_theta") or 10_000.0),
        rms_norm_eps=float(config.get("rms_norm_eps") or 1e-6),
        max_position_embeddings=_int(config, "max_position_embeddings", default=8192),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        pad_token_id=None,
        storage=_storage(config),
        attention_bias=bool(config.get("attention_bias", model_type == "qwen2")),  # Qwen2: q/k/v bias always
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        num_experts=experts,
        num_shared_experts=_int(config, "n_shared_experts") if experts else 0,
        experts_per_token=_int(config, "num_experts_per_tok") if experts else 0,
        # Mixtral's experts are intermediate_size wide; the others name moe_intermediate_size.
        moe_intermediate_size=_int(config, "moe_intermediate_size", "intermediate_size") if experts else 0,
        num_dense_layers=_dense_layers(config, model_type, layers) if experts else 0,
        q_lora_rank=_int(config, "q_lora_rank") if kv_lora else 0,
        kv_lora_rank=kv_lora,
        qk_nope_head_dim=nope if kv_lora else 0,
        qk_rope_head_dim=rope if kv_lora else 0,
        v_head_dim=_int(config, "v_head_dim") if kv_lora else 0,
    )


@dataclass(frozen=True)
class CatalogModel:
    name: str  # the short alias; also the shape's name
    hub_ids: tuple[str, ...]  # the first is where the figures were read
    config: Mapping[str, Any]  # config.json keys, verbatim
    published: float  # total parameters, model card
    published_active: float | None = None  # MoE: activated parameters per token, model card
    aliases: tuple[str, ...] = ()

    @property
    def shape(self) -> ModelShape:
        return shape_from_config(self.config, self.name)

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases, *self.hub_ids, *(h.split("/", 1)[-1] for h in self.hub_ids))


def _hub(*ids: str, instruct: str = "-Instruct") -> tuple[str, ...]:
    return tuple(i for base in ids for i in (base, base + instruct))


_LLAMA3: dict[str, Any] = {
    "model_type": "llama", "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}
_QWEN25: dict[str, Any] = {
    "model_type": "qwen2", "vocab_size": 152064, "max_position_embeddings": 131072, "rope_theta": 1000000.0,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}
_QWEN3: dict[str, Any] = {
    "model_type": "qwen3", "vocab_size": 151936, "head_dim": 128, "max_position_embeddings": 40960,
    "rope_theta": 1000000, "attention_bias": False, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}
_QWEN3_MOE: dict[str, Any] = {
    **_QWEN3, "model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [],
}
_MIXTRAL: dict[str, Any] = {
    "model_type": "mixtral", "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
    "rope_theta": 1000000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}


def _dims(hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int) -> dict[str, int]:
    return {
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "intermediate_size": intermediate,
    }


MODELS: tuple[CatalogModel, ...] = (
    # -- Meta Llama 3.x -------------------------------------------------------------------------
    CatalogModel("llama-3.2-1b", _hub("meta-llama/Llama-3.2-1B"),
                 {**_LLAMA3, **_dims(2048, 16, 32, 8, 8192), "head_dim": 64, "tie_word_embeddings": True}, 1.24e9),
    CatalogModel("llama-3.2-3b", _hub("meta-llama/Llama-3.2-3B"),
                 {**_LLAMA3, **_dims(3072, 28, 24, 8, 8192), "head_dim": 128, "tie_word_embeddings": True}, 3.21e9),
    CatalogModel("llama-3.1-8b", _hub("meta-llama/Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B"),
                 {**_LLAMA3, **_dims(4096, 32, 32, 8, 14336)}, 8.03e9),
    CatalogModel("llama-3.1-70b", _hub("meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B"),
                 {**_LLAMA3, **_dims(8192, 80, 64, 8, 28672)}, 70.6e9),
    CatalogModel("llama-3.3-70b", ("meta-llama/Llama-3.3-70B-Instruct",),
                 {**_LLAMA3, **_dims(8192, 80, 64, 8, 28672)}, 70.6e9),
    CatalogModel("llama-3.1-405b", _hub("meta-llama/Llama-3.1-405B", "meta-llama/Meta-Llama-3.1-405B"),
                 {**_LLAMA3, **_dims(16384, 126, 128, 8, 53248)}, 405.9e9),
    # -- Qwen2.5 (q/k/v biases) -----------------------------------------------------------------
    CatalogModel("qwen2.5-7b", _hub("Qwen/Qwen2.5-7B"), {**_QWEN25, **_dims(3584, 28, 28, 4, 18944)}, 7.61e9),
    CatalogModel("qwen2.5-14b", _hub("Qwen/Qwen2.5-14B"), {**_QWEN25, **_dims(5120, 48, 40, 8, 13824)}, 14.7e9),
    CatalogModel("qwen2.5-32b", _hub("Qwen/Qwen2.5-32B"), {**_QWEN25, **_dims(5120, 64, 40, 8, 27648)}, 32.5e9),
    CatalogModel("qwen2.5-72b", _hub("Qwen/Qwen2.5-72B"), {**_QWEN25, **_dims(8192, 80, 64, 8, 29568)}, 72.7e9),
    # -- Qwen3 (q/k norm; head_dim 128 whatever the hidden size) ---------------------------------
    CatalogModel("qwen3-8b", _hub("Qwen/Qwen3-8B", instruct="-Base"), {**_QWEN3, **_dims(4096, 36, 32, 8, 12288)}, 8.2e9),
    CatalogModel("qwen3-32b", ("Qwen/Qwen3-32B",), {**_QWEN3, **_dims(5120, 64, 64, 8, 25600)}, 32.8e9),
    CatalogModel("qwen3-30b-a3b", _hub("Qwen/Qwen3-30B-A3B", instruct="-Base"),
                 {**_QWEN3_MOE, **_dims(2048, 48, 32, 4, 6144), "moe_intermediate_size": 768}, 30.5e9, 3.3e9),
    CatalogModel("qwen3-235b-a22b", ("Qwen/Qwen3-235B-A22B",),
                 {**_QWEN3_MOE, **_dims(4096, 94, 64, 4, 12288), "moe_intermediate_size": 1536}, 235e9, 22e9),
    # -- Mixtral (8 experts, top 2) -------------------------------------------------------------
    CatalogModel("mixtral-8x7b", ("mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
                 {**_MIXTRAL, **_dims(4096, 32, 32, 8, 14336), "max_position_embeddings": 32768}, 46.7e9, 12.9e9),
    CatalogModel("mixtral-8x22b", ("mistralai/Mixtral-8x22B-v0.1", "mistralai/Mixtral-8x22B-Instruct-v0.1"),
                 {**_MIXTRAL, **_dims(6144, 56, 48, 8, 16384), "max_position_embeddings": 65536}, 141e9, 39e9),
    # -- DeepSeek-V3 (MoE: 1 shared + 8 of 256 routed experts, 3 dense layers; MLA) -------------
    CatalogModel(
        "deepseek-v3", ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-Base", "deepseek-ai/DeepSeek-V3-0324"),
        {
            "model_type": "deepseek_v3", **_dims(7168, 61, 128, 128, 18432), "vocab_size": 129280,
            "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
            "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
            "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840,
            "rope_theta": 10000, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
        },
        671e9, 37e9,
    ),
)


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum() or ch == "/")


def _index() -> dict[str, CatalogModel]:
    index: dict[str, CatalogModel] = {}
    for model in MODELS:
        for name in model.names():
            other = index.setdefault(_key(name), model)
            if other is not model:
                raise RuntimeError(f"model catalogue: {name!r} names both {other.name} and {model.name}")
    return index


CATALOG: dict[str, CatalogModel] = {m.name: m for m in MODELS}
_BY_KEY = _index()


def find_model(name: str) -> CatalogModel | None:
    """The catalogue model called ``name`` (hub id, its last part, or alias, in any case), or None."""
    return _BY_KEY.get(_key(name))


def known_names(closest_to: str | None = None) -> list[str]:
    """The catalogue's short names; with ``closest_to``, the most similar first: by difflib's
    longest common run of characters with any of a model's names, then by its similarity ratio."""
    if closest_to is None:
        return list(CATALOG)
    wanted = _key(closest_to)

    def score(model: CatalogModel) -> tuple[int, float]:
        matchers = (difflib.SequenceMatcher(None, wanted, _key(n)) for n in model.names())
        return max((m.find_longest_match().size, m.ratio()) for m in matchers)

    return [m.name for m in sorted(MODELS, key=score, reverse=True)]


def get_model(name: str) -> CatalogModel:
    """:func:`find_model`, or ValueError listing the known names, closest first."""
    model = find_model(name)
    if model is None:
        raise ValueError(f"unknown model {name!r}; known (closest first): {', '.join(known_names(name))}")
    return model
