"""Model shapes: the named reference sizes and Hugging Face ``config.json`` in and out.

A shape is pure data (no torch), so the planner and the service can reason about models
without loading one.  The reference shapes are Llama-style decoders (RMSNorm, RoPE, SwiGLU,
grouped-query attention) with the byte-level vocabulary of :mod:`worker.tokenizer`:

============  ======  ======  =====  ========  ============  ==========================
name          layers  hidden  heads  kv heads  intermediate  parameters
============  ======  ======  =====  ========  ============  ==========================
ref-tiny           4     128      4         2           384  ~0.86 M (tests, CPU)
ref-small         12     768     12         4          3840  ~125 M (GPT-2-small-sized)
ref-1b            16    2048     32         8          8192  ~0.97 B (Llama-3.2-1B body)
ref-7b            32    4096     32         8         14336  ~6.98 B (Mistral-7B body)
============  ======  ======  =====  ========  ============  ==========================

Shapes of published models (:mod:`worker.model_catalog`, for ``infermeter plan`` only) also
use the optional fields below the reference ones: q/k/v biases (Qwen2.5), q/k RMSNorm (Qwen3),
mixture-of-experts MLPs (Mixtral, Qwen3-MoE, DeepSeek-V3) and multi-head latent attention
(DeepSeek-V3).  The reference engine implements none of them: such a shape is plan-only.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

BYTE_VOCAB = 259  # 256 bytes + <s> + </s> + <pad>
BOS_ID, EOS_ID, PAD_ID = 256, 257, 258

BYTES_PER_PARAM: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
HF_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class ModelShape:
    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int = BYTE_VOCAB
    head_dim: int = 0  # 0: hidden_size // num_heads
    rope_theta: float = 10_000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 8192
    tie_word_embeddings: bool = False
    bos_token_id: int = BOS_ID
    eos_token_id: int = EOS_ID
    pad_token_id: int | None = PAD_ID
    # The dtype weights are generated and stored in (reference shapes); for a published model,
    # the dtype of its released weights (``fp8`` for DeepSeek-V3), which ``plan`` defaults to.
    storage: str = "fp32"
    # -- plan-only architecture (0 / False: absent) ---------------------------------------
    attention_bias: bool = False  # biases on the q, k and v projections (Qwen2.5)
    qk_norm: bool = False  # a head_dim RMSNorm on q and on k (Qwen3)
    num_experts: int = 0  # routed experts per MoE layer; 0: every MLP is dense
    num_shared_experts: int = 0  # experts every token also runs (DeepSeek)
    experts_per_token: int = 0  # top-k routed experts per token
    moe_intermediate_size: int = 0  # intermediate size of one expert (and of a shared one)
    num_dense_layers: int = 0  # MoE models: layers whose MLP is dense (intermediate_size)
    q_lora_rank: int = 0  # MLA: rank of the query down-projection (0: a plain q projection)
    kv_lora_rank: int = 0  # MLA: rank of the cached KV latent; 0: not MLA
    qk_nope_head_dim: int = 0  # MLA: per-head q/k dims without RoPE
    qk_rope_head_dim: int = 0  # MLA: per-head q/k dims with RoPE (the k part is shared, cached)
    v_head_dim: int = 0  # MLA: per-head value dims

    def __post_init__(self) -> None:
        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.name}: num_heads must be a multiple of num_kv_heads")
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise ValueError(f"{self.name}: experts_per_token must be in 1..num_experts")
        if self.num_experts and not self.moe_intermediate_size:
            raise ValueError(f"{self.name}: an MoE shape needs moe_intermediate_size")

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def uses_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): K and V are cached as one latent."""
        return self.kv_lora_rank > 0

    @property
    def plan_only(self) -> bool:
        """True when the reference engine cannot run this shape (``plan`` can still size it)."""
        return self.is_moe or self.uses_mla or self.attention_bias or self.qk_norm

    # -- sizes ---------------------------------------------------------------------------
    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def attention_params(self) -> int:
        """One layer's attention weights."""
        h = self.hidden_size
        if self.uses_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:  # q_a_proj, q_a_layernorm, q_b_proj
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.num_heads * qk_head
            else:
                q = h * self.num_heads * qk_head
            kv = (
                h * (self.kv_lora_rank + self.qk_rope_head_dim)  # kv_a_proj_with_mqa
                + self.kv_lora_rank  # kv_a_layernorm
                + self.kv_lora_rank * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)  # kv_b_proj
            )
            return q + kv + self.num_heads * self.v_head_dim * h  # + o_proj
        attn = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        if self.attention_bias:
            attn += self.q_size + 2 * self.kv_size
        if self.qk_norm:
            attn += 2 * self.head_dim
        return attn

    def expert_params(self) -> int:
        """One expert's SwiGLU MLP (gate, up, down)."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    def layer_params(self, *, moe: bool = False, experts: float | None = None) -> float:
        """One layer: attention + MLP + the two RMSNorm weights.  ``moe``: an MoE layer with
        ``experts`` routed experts counted (default: all of them) plus the shared ones and the router."""
        if moe:
            routed = self.num_experts if experts is None else experts
            mlp: float = (routed + self.num_shared_experts) * self.expert_params() + self.hidden_size * self.num_experts
        else:
            mlp = 3 * self.hidden_size * self.intermediate_size
        return self.attention_params() + mlp + 2 * self.hidden_size

    def _body_params(self, experts: float | None = None) -> float:
        if not self.is_moe:
            return self.num_layers * self.layer_params()
        moe_layers = self.num_layers - self.num_dense_layers
        return self.num_dense_layers * self.layer_params() + moe_layers * self.layer_params(moe=True, experts=experts)

    def param_count(self) -> int:
        """Every parameter (all experts): what has to be resident in memory."""
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embed
        return int(self._body_params()) + embed + head + self.hidden_size

    def active_param_count(self) -> int:
        """Parameters one token uses, counted the way model cards count "activated" parameters
        (Mixtral 12.9 B, Qwen3-30B-A3B 3.3 B): the top-k routed experts, not all of them, and the
        embedding table whole.  A dense model: :meth:`param_count`."""
        if not self.is_moe:
            return self.param_count()
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embed
        return int(self._body_params(self.experts_per_token)) + embed + head + self.hidden_size

    def expected_experts_read(self, batch: int) -> float:
        """Distinct routed experts per MoE layer that a decode step of ``batch`` tokens touches,
        assuming uniform, independent routing: E x (1 - (1 - k/E)^batch).  k for one token, all
        E for a large batch; real routers are skewed, so this is an upper estimate."""
        if not self.is_moe:
            return 0.0
        e, k = self.num_experts, self.experts_per_token
        return e * (1 - (1 - k / e) ** max(1, batch))

    def params_read_per_step(self, batch: int = 1) -> float:
        """Weights one decode step of ``batch`` tokens reads: every non-expert matrix and the LM
        head once, the experts the batch is routed to (:meth:`expected_experts_read`), and only
        one row of the input embedding per token (so not the table)."""
        experts = self.expected_experts_read(batch) if self.is_moe else None
        head = self.vocab_size * self.hidden_size
        return self._body_params(experts) + head + self.hidden_size * 2

    def params_per_token(self) -> float:
        """Parameters one token is multiplied through (2 FLOPs each): :meth:`params_read_per_step` of 1."""
        return self.params_read_per_step(1)

    def bytes_read_per_token(self, bytes_per_param: float) -> float:
        """Weight bytes one decode step reads: every matrix once, the embedding one row."""
        return self.params_read_per_step(1) * bytes_per_param

    def kv_values_per_token(self) -> int:
        """Cached values per token of context, all layers: 2 (K and V) x layers x kv_heads x
        head_dim; with MLA, layers x (kv_lora_rank + qk_rope_head_dim) -- one compressed latent
        and one shared RoPE key per token per layer, whatever the number of heads."""
        if self.uses_mla:
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim)
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim

    def kv_bytes_per_token(self, bytes_per_value: float) -> float:
        """KV cache bytes per token of context: :meth:`kv_values_per_token` x bytes."""
        return self.kv_values_per_token() * bytes_per_value

    def tp_supported(self, tp: int) -> bool:
        """Whether a tensor-parallel group of ``tp`` can split this model as vLLM does: attention
        heads evenly, and KV heads evenly or (tp a multiple of them) replicated."""
        if tp < 1 or self.num_heads % tp:
            return False
        kv = self.num_kv_heads
        return self.uses_mla or kv % tp == 0 or tp % kv == 0

    def kv_bytes_per_token_per_device(self, bytes_per_value: float, tp: int) -> float:
        """One device's share of :meth:`kv_bytes_per_token` in a tensor-parallel group of ``tp``:
        KV heads are split, but never below one head per device (past that they are replicated);
        the MLA latent is not per head, so every device caches all of it."""
        if self.uses_mla or tp <= 1:
            return self.kv_bytes_per_token(bytes_per_value)
        heads_here = math.ceil(self.num_kv_heads / tp)
        return 2 * self.num_layers * heads_here * self.head_dim * bytes_per_value

    # -- Hugging Face config.json --------------------------------------------------------
    def to_hf_config(self, dtype: str | None = None) -> dict[str, Any]:
        if self.plan_only:
            raise ValueError(f"{self.name}: a plan-only shape (MoE, MLA, biases or qk-norm) has no Llama config.json")
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "attention_bias": False,
            "mlp_bias": False,
            "tie_word_embeddings": self.tie_word_embeddings,
            "vocab_size": self.vocab_size,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "pad_token_id": self.pad_token_id,
            "torch_dtype": HF_DTYPE.get(dtype or self.storage, "float32"),
            "infermeter_reference": self.name,
        }

    @classmethod
    def from_hf_config(cls, config: dict[str, Any], name: str) -> ModelShape:
        """The shape of a Hugging Face Llama-family ``config.json``; raises ValueError naming
        what this reference engine does not implement."""
        arch = config.get("architectures") or ["?"]
        if config.get("model_type") not in ("llama", "mistral") and "LlamaForCausalLM" not in arch:
            raise ValueError(f"{name}: model_type {config.get('model_type')!r} ({arch[0]}) is not Llama-shaped")
        for key in ("attention_bias", "mlp_bias"):
            if config.get(key):
                raise ValueError(f"{name}: {key}=true is not supported by the reference engine")
        if config.get("rope_scaling"):
            raise ValueError(f"{name}: rope_scaling {config['rope_scaling']!r} is not supported")
        if config.get("hidden_act", "silu") != "silu":
            raise ValueError(f"{name}: hidden_act {config['hidden_act']!r} is not supported (silu only)")
        heads = int(config["num_attention_heads"])
        eos = config.get("eos_token_id", EOS_ID)
        torch_dtype = str(config.get("torch_dtype") or "float32")
        storage = {v: k for k, v in HF_DTYPE.items()}.get(torch_dtype, "fp32")
        return cls(
            name=name,
            num_layers=int(config["num_hidden_layers"]),
            hidden_size=int(config["hidden_size"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            intermediate_size=int(config["intermediate_size"]),
            vocab_size=int(config["vocab_size"]),
            head_dim=int(config.get("head_dim") or 0),
            rope_theta=float(config.get("rope_theta", 10_000.0)),
            rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(config.get("max_position_embeddings", 8192)),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            bos_token_id=int(config.get("bos_token_id") or 0),
            eos_token_id=int(eos[0] if isinstance(eos, list) else eos if eos is not None else -1),
            pad_token_id=config.get("pad_token_id"),
            storage=storage,
        )

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "parameters": self.param_count()}


REFERENCE_SHAPES: dict[str, ModelShape] = {
    s.name: s
    for s in (
        ModelShape("ref-tiny", num_layers=4, hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=384),
        ModelShape("ref-small", num_layers=12, hidden_size=768, num_heads=12, num_kv_heads=4, intermediate_size=3840),
        ModelShape(
            "ref-1b", num_layers=16, hidden_size=2048, num_heads=32, num_kv_heads=8, intermediate_size=8192,
            rope_theta=500_000.0, storage="bf16",
        ),
        ModelShape(
            "ref-7b", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, intermediate_size=14336,
            rope_theta=1_000_000.0, storage="bf16",
        ),
    )
}


def reference_shape(name: str) -> ModelShape | None:
    return REFERENCE_SHAPES.get(name)


def shape_for(model: str) -> ModelShape:
    """The shape ``plan`` sizes: a reference name, a checkpoint directory (its ``config.json``:
    Llama, Mistral, Mixtral, Qwen2/2.5, Qwen3, Qwen3-MoE or DeepSeek-V3 keys), or a published
    model's name from :mod:`worker.model_catalog` (hub id or alias, any case)."""
    from worker.model_catalog import find_model, known_names, shape_from_config

    shape = REFERENCE_SHAPES.get(model)
    if shape is not None:
        return shape
    config = Path(model) / "config.json"
    if config.is_file():
        return shape_from_config(json.loads(config.read_text(encoding="utf-8")), model)
    entry = find_model(model)
    if entry is not None:
        return entry.shape
    raise ValueError(
        f"{model!r} is neither a reference model ({', '.join(REFERENCE_SHAPES)}), a directory with config.json, "
        f"nor a catalogue model; known (closest first): {', '.join(known_names(model))}"
    )


def with_context(shape: ModelShape, max_context: int) -> ModelShape:
    return replace(shape, max_position_embeddings=max(shape.max_position_embeddings, max_context))
