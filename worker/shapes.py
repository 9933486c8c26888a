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
"""

from __future__ import annotations

import json
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
    # The dtype weights are generated and stored in (reference shapes only).
    storage: str = "fp32"

    def __post_init__(self) -> None:
        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.name}: num_heads must be a multiple of num_kv_heads")

    # -- sizes ---------------------------------------------------------------------------
    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def layer_params(self) -> int:
        attn = self.hidden_size * (self.q_size + 2 * self.kv_size) + self.q_size * self.hidden_size
        mlp = 3 * self.hidden_size * self.intermediate_size
        return attn + mlp + 2 * self.hidden_size  # + the two RMSNorm weights

    def param_count(self) -> int:
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embed
        return self.num_layers * self.layer_params() + embed + head + self.hidden_size

    def bytes_read_per_token(self, bytes_per_param: float) -> float:
        """Weight bytes one decode step reads: every matrix once, the embedding one row."""
        head = self.vocab_size * self.hidden_size
        return (self.num_layers * self.layer_params() + head + self.hidden_size * 2) * bytes_per_param

    def kv_bytes_per_token(self, bytes_per_value: float) -> float:
        """KV cache bytes per token of context: 2 (K and V) x layers x kv_heads x head_dim x bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * bytes_per_value

    # -- Hugging Face config.json --------------------------------------------------------
    def to_hf_config(self, dtype: str | None = None) -> dict[str, Any]:
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
    """A reference name, or a checkpoint directory (its ``config.json``), as a shape."""
    shape = REFERENCE_SHAPES.get(model)
    if shape is not None:
        return shape
    config = Path(model) / "config.json"
    if not config.is_file():
        known = ", ".join(REFERENCE_SHAPES)
        raise ValueError(f"{model!r} is neither a reference model ({known}) nor a directory with config.json")
    return ModelShape.from_hf_config(json.loads(config.read_text(encoding="utf-8")), model)


def with_context(shape: ModelShape, max_context: int) -> ModelShape:
    return replace(shape, max_position_embeddings=max(shape.max_position_embeddings, max_context))
