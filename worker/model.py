"""The decoder: a Llama-shaped transformer (RMSNorm, RoPE, SwiGLU, grouped-query attention)
in plain PyTorch, with a slot-based KV cache for iteration-level batching.

Numerics follow Hugging Face ``LlamaForCausalLM`` (rotate-half RoPE with cos/sin computed in
float32, RMSNorm with the weight applied after normalisation), so the same safetensors give the
same logits in ``transformers`` -- a test checks it.  At load the projections are fused
(q|k|v, gate|up) and, on CPUs with oneDNN, packed once into oneDNN's blocked layout: a batch-1
decode step is a sweep over the weights, and the packed kernels stream them at close to memory
bandwidth (plain ``F.linear`` reaches about half of it here).  Packing is checked against
``F.linear`` on a probe input and skipped when unavailable or different.

KV cache layout: per layer ``[slots, kv_heads, capacity, head_dim]``.  Running sequences occupy
slots ``0..n-1`` (the engine keeps them compact), so a decode step attends over
``cache[:n, :, :L]`` with a length mask -- one batched attention call per layer, no gather.
Capacity grows by doubling up to the context limit and shrinks back when the engine is idle.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from worker.moe import ExpertRouter
from worker.shapes import ModelShape

Tensor = torch.Tensor
_HAS_RMS_NORM = hasattr(F, "rms_norm")  # torch >= 2.4


class LinearOp:
    """``y = x @ W.T``, through a packed oneDNN weight when that works and agrees with F.linear."""

    def __init__(self, weight: Tensor, pack: bool) -> None:
        self.out_features = int(weight.shape[0])
        self.packed = False
        self._weight = weight
        self._call: Callable[[Tensor], Tensor] = self._plain
        if pack and weight.device.type == "cpu" and weight.dtype in (torch.float32, torch.bfloat16):
            try:
                packed = torch.ops.mkldnn._reorder_linear_weight(weight)
                probe = torch.randn(3, weight.shape[1], generator=torch.Generator().manual_seed(1)).to(weight.dtype)
                got = torch.ops.mkldnn._linear_pointwise(probe, packed, None, "none", [None], "")
                want = F.linear(probe, weight)
                tol = 1e-3 if weight.dtype == torch.float32 else 3e-2
                if got.shape == want.shape and torch.allclose(got.float(), want.float(), rtol=tol, atol=tol):
                    self._packed_weight = packed
                    self._weight = torch.empty(0, dtype=weight.dtype)  # the packed copy replaces it
                    self._call = self._packed_call
                    self.packed = True
            except (RuntimeError, AttributeError):
                pass

    def _plain(self, x: Tensor) -> Tensor:
        return F.linear(x, self._weight)

    def _packed_call(self, x: Tensor) -> Tensor:
        out: Tensor = torch.ops.mkldnn._linear_pointwise(x, self._packed_weight, None, "none", [None], "")
        return out

    def __call__(self, x: Tensor) -> Tensor:
        return self._call(x)


class _Layer:
    def __init__(self, t: dict[str, Tensor], prefix: str, pack: bool) -> None:
        a, m = prefix + "self_attn.", prefix + "mlp."
        self.attn_norm = t[prefix + "input_layernorm.weight"]
        self.mlp_norm = t[prefix + "post_attention_layernorm.weight"]
        qkv = torch.cat([t[a + "q_proj.weight"], t[a + "k_proj.weight"], t[a + "v_proj.weight"]])
        self.wqkv = LinearOp(qkv.contiguous(), pack)
        self.wo = LinearOp(t[a + "o_proj.weight"].contiguous(), pack)
        self.w_gate_up = LinearOp(torch.cat([t[m + "gate_proj.weight"], t[m + "up_proj.weight"]]).contiguous(), pack)
        self.w_down = LinearOp(t[m + "down_proj.weight"].contiguous(), pack)


class KVCache:
    """Keys and values of every slot, per layer ``[slots, kv_heads, capacity, head_dim]``."""

    def __init__(
        self, shape: ModelShape, slots: int, max_len: int, dtype: torch.dtype, device: torch.device,
        initial: int = 256,
    ) -> None:
        self.shape, self.slots, self.max_len = shape, slots, max_len
        self.dtype, self.device = dtype, device
        self.initial = min(initial, max_len)
        self.capacity = 0
        self.k: list[Tensor] = []
        self.v: list[Tensor] = []
        self._allocate(self.initial)

    # Growth happens inside the model's inference_mode steps, so the tensors are inference
    # tensors; every other in-place use must be in inference mode too.
    @torch.inference_mode()
    def _allocate(self, capacity: int, keep: int = 0) -> None:
        dims = (self.slots, self.shape.num_kv_heads, capacity, self.shape.head_dim)
        new_k = [torch.zeros(dims, dtype=self.dtype, device=self.device) for _ in range(self.shape.num_layers)]
        new_v = [torch.zeros(dims, dtype=self.dtype, device=self.device) for _ in range(self.shape.num_layers)]
        if keep:
            for old, new in zip(self.k + self.v, new_k + new_v):
                new[:, :, :keep] = old[:, :, :keep]
        self.k, self.v, self.capacity = new_k, new_v, capacity

    def ensure(self, length: int) -> None:
        """Room for ``length`` positions in every slot (doubling, capped at max_len)."""
        if length > self.max_len:
            raise ValueError(f"sequence of {length} tokens exceeds the context limit {self.max_len}")
        if length > self.capacity:
            grown = self.capacity
            while grown < length:
                grown *= 2
            self._allocate(min(grown, self.max_len), keep=self.capacity)

    def shrink(self) -> None:
        if self.capacity > self.initial:
            self._allocate(self.initial)

    @torch.inference_mode()
    def move(self, src: int, dst: int, length: int) -> None:
        """Copy slot ``src``'s first ``length`` positions into slot ``dst``."""
        if src != dst and length > 0:
            for t in self.k + self.v:
                t[dst, :, :length] = t[src, :, :length]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


class LlamaDecoder:
    def __init__(
        self, shape: ModelShape, tensors: dict[str, Tensor], *, device: torch.device, dtype: torch.dtype,
        pack: bool = True, router: ExpertRouter | None = None,
    ) -> None:
        self.shape, self.device, self.dtype = shape, device, dtype
        self.router = router  # MoE mode: each token runs the FFN slices of its top-k experts
        t = {name: tensor.to(device=device, dtype=dtype) for name, tensor in tensors.items()}
        self.embed = t["model.embed_tokens.weight"]
        self.layers = [_Layer(t, f"model.layers.{i}.", pack) for i in range(shape.num_layers)]
        self.norm = t["model.norm.weight"]
        head = t.get("lm_head.weight", self.embed if shape.tie_word_embeddings else None)
        if head is None:
            raise KeyError("lm_head.weight missing (and tie_word_embeddings is false)")
        self.lm_head = LinearOp(head.contiguous(), pack)
        self.packed = all(op.packed for layer in self.layers for op in (layer.wqkv, layer.w_down))
        hd = shape.head_dim
        inv = 1.0 / (shape.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        freqs = torch.outer(torch.arange(shape.max_position_embeddings, dtype=torch.float32), inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos = emb.cos().to(device=device, dtype=dtype)
        self.sin = emb.sin().to(device=device, dtype=dtype)
        self.groups = shape.num_heads // shape.num_kv_heads

    def new_cache(self, slots: int, max_len: int) -> KVCache:
        return KVCache(self.shape, slots, min(max_len, self.shape.max_position_embeddings), self.dtype, self.device)

    # -- pieces ---------------------------------------------------------------------------
    def _norm(self, x: Tensor, weight: Tensor) -> Tensor:
        if _HAS_RMS_NORM:
            return F.rms_norm(x, (x.shape[-1],), weight, self.shape.rms_norm_eps)
        x32 = x.float()  # torch < 2.4: Hugging Face's formulation
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.shape.rms_norm_eps)).to(x.dtype)

    @staticmethod
    def _rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def _qkv(self, layer: _Layer, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        s = self.shape
        n = x.shape[0]
        qkv = layer.wqkv(self._norm(x, layer.attn_norm))
        qk = self._rope(qkv[:, : s.q_size + s.kv_size].view(n, s.num_heads + s.num_kv_heads, s.head_dim), cos, sin)
        v = qkv[:, s.q_size + s.kv_size :].view(n, s.num_kv_heads, s.head_dim)
        return qk[:, : s.num_heads], qk[:, s.num_heads :], v

    def _mlp(self, index: int, layer: _Layer, x: Tensor) -> Tensor:
        normed = self._norm(x, layer.mlp_norm)
        gate, up = layer.w_gate_up(normed).chunk(2, dim=-1)
        act = F.silu(gate) * up
        if self.router is not None:
            act = act * self.router.mask(index, normed)
        return x + layer.w_down(act)

    # -- steps ----------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, cache: KVCache, slot: int, tokens: list[int], start: int) -> Tensor:
        """Run ``tokens`` at positions ``start..`` of ``slot``; float32 logits of the last one."""
        s, g = self.shape, self.groups
        c, end = len(tokens), start + len(tokens)
        cache.ensure(end)
        x = F.embedding(torch.tensor(tokens, dtype=torch.long, device=self.device), self.embed)
        cos, sin = self.cos[start:end].unsqueeze(1), self.sin[start:end].unsqueeze(1)
        pos = torch.arange(start, end, device=self.device)
        mask = (torch.arange(end, device=self.device)[None, :] <= pos[:, None]).repeat(g, 1)  # [g*c, end]
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, cos, sin)
            cache.k[i][slot, :, start:end] = k.transpose(0, 1)
            cache.v[i][slot, :, start:end] = v.transpose(0, 1)
            qg = q.transpose(0, 1).reshape(s.num_kv_heads, g * c, s.head_dim)
            o = F.scaled_dot_product_attention(qg, cache.k[i][slot, :, :end], cache.v[i][slot, :, :end], attn_mask=mask)
            o = o.view(s.num_kv_heads, g, c, s.head_dim).reshape(s.num_heads, c, s.head_dim).transpose(0, 1)
            x = x + layer.wo(o.reshape(c, s.q_size))
            x = self._mlp(i, layer, x)
        return self.lm_head(self._norm(x[-1:], self.norm))[0].float()

    @torch.inference_mode()
    def decode(self, cache: KVCache, tokens: list[int], positions: list[int]) -> Tensor:
        """One token for each of slots ``0..n-1`` at its position; float32 logits ``[n, vocab]``."""
        s = self.shape
        n = len(tokens)
        length = max(positions) + 1
        cache.ensure(length)
        dev = self.device
        x = F.embedding(torch.tensor(tokens, dtype=torch.long, device=dev), self.embed)
        pos = torch.tensor(positions, dtype=torch.long, device=dev)
        cos, sin = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)
        slots = torch.arange(n, device=dev)
        mask = (torch.arange(length, device=dev)[None, :] <= pos[:, None]).view(n, 1, 1, length)
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, x, cos, sin)
            cache.k[i].transpose(1, 2)[slots, pos] = k
            cache.v[i].transpose(1, 2)[slots, pos] = v
            qg = q.view(n, s.num_kv_heads, self.groups, s.head_dim)
            o = F.scaled_dot_product_attention(
                qg, cache.k[i][:n, :, :length], cache.v[i][:n, :, :length], attn_mask=mask
            )
            x = x + layer.wo(o.reshape(n, s.q_size))
            x = self._mlp(i, layer, x)
        return self.lm_head(self._norm(x, self.norm)).float()

    @torch.inference_mode()
    def logits_all(self, tokens: list[int]) -> Tensor:
        """Logits at every position of one sequence (tests): prefill one token at a time."""
        cache = self.new_cache(1, len(tokens))
        return torch.stack([self.prefill(cache, 0, [tok], i) for i, tok in enumerate(tokens)])


def pick_device(requested: str) -> torch.device:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("device: cuda asked for, but torch sees no CUDA device")
        return torch.device("cuda")
    return torch.device("cpu")


def cpu_has_bf16() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (RuntimeError, AttributeError):
        return False


def pick_dtype(precision: str, device: torch.device) -> torch.dtype:
    """``auto``: bf16 on CUDA and on CPUs with native bf16 (AVX512-BF16/AMX), else fp32."""
    if precision == "auto":
        if device.type == "cuda" or cpu_has_bf16():
            return torch.bfloat16
        return torch.float32
    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if precision not in table:
        raise ValueError(f"precision {precision!r} is for `infermeter plan` only; the reference engine runs fp32, bf16, fp16")
    return table[precision]


def precision_name(dtype: torch.dtype) -> str:
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
