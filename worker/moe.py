"""The reference worker's MoE mode: noisy top-k routing over experts cut from each layer's FFN.

Why this shape: the reference weights are a dense Llama, so the experts are the FFN's intermediate
units split into ``experts`` equal slices (the "MoEfication" of a dense model); a token runs only
the slices its router picks, as a token of a sparse MoE model runs only its experts. The router is
a per-layer linear map of the normalised hidden state plus a fixed bias ``ln(share)`` and Gumbel
noise (noisy top-k gating): with ``skew`` 0 the experts are picked evenly, with a larger skew the
low-numbered experts are favoured by :func:`zipf_shares`, which is how the tests
produce a known imbalance. Counts are kept per layer and expert on the host and exported as
``moe_expert_tokens_total{layer,expert}``: tokens routed, each token counted once per expert it
went to (``top_k`` per token and layer), as engines count them.
"""

from __future__ import annotations

import math
import threading

import torch

Tensor = torch.Tensor
_ROUTER_SCALE = 0.1  # the content-dependent part of the logits stays small next to the bias


def zipf_shares(experts: int, skew: float) -> list[float]:
    """Routing shares ``∝ (rank + 1) ** -skew``: uniform at 0, one favoured expert as it grows (the
    worker imports nothing of ours, so this lives here; the tests check what is collected
    against it with :mod:`moe.balance`)."""
    weights = [(i + 1) ** -skew for i in range(experts)]
    total = sum(weights)
    return [w / total for w in weights]


class ExpertRouter:
    def __init__(
        self, *, layers: int, hidden: int, intermediate: int, experts: int, top_k: int, skew: float, seed: int,
        device: torch.device, dtype: torch.dtype,
    ) -> None:
        if intermediate % experts:
            raise ValueError(
                f"moe.experts {experts} must divide the model's intermediate size {intermediate} (the experts are "
                "equal slices of each layer's FFN)"
            )
        if not 1 <= top_k <= experts:
            raise ValueError(f"moe.top_k {top_k} must be between 1 and moe.experts {experts}")
        self.layers, self.experts, self.top_k = layers, experts, top_k
        self.slice = intermediate // experts
        gen = torch.Generator().manual_seed(seed)
        self.weights = [
            (torch.randn(experts, hidden, generator=gen) * (_ROUTER_SCALE / math.sqrt(hidden))).to(device, torch.float32)
            for _ in range(layers)
        ]
        self.bias = torch.tensor([math.log(s) for s in zipf_shares(experts, skew)], dtype=torch.float32, device=device)
        self._noise = torch.Generator(device=device).manual_seed(seed + 1)
        # On the model's device: adding there costs no host round trip per layer and step (on a GPU a
        # .cpu() here would synchronise every layer); the host copy is made at scrape time only.
        self._counts = torch.zeros(layers, experts, dtype=torch.int64, device=device)
        self._lock = threading.Lock()
        self.dtype = dtype

    def mask(self, layer: int, normed: Tensor) -> Tensor:
        """``[tokens, intermediate]`` of 1/0: the FFN units of the experts each token is routed to."""
        logits = normed.float() @ self.weights[layer].T + self.bias
        uniform = torch.rand(logits.shape, generator=self._noise, device=logits.device).clamp_(1e-9, 1 - 1e-9)
        chosen = (logits - torch.log(-torch.log(uniform))).topk(self.top_k, dim=-1).indices
        counts = torch.bincount(chosen.flatten(), minlength=self.experts)
        with self._lock:
            self._counts[layer] += counts
        picked = torch.zeros(logits.shape, dtype=self.dtype, device=logits.device).scatter_(1, chosen, 1.0)
        return picked.repeat_interleave(self.slice, dim=1)

    def counts(self) -> list[list[int]]:
        """Tokens routed so far, ``[layer][expert]`` (a copy)."""
        with self._lock:
            return [[int(v) for v in row] for row in self._counts.tolist()]

    def reset(self) -> None:
        """Forget the warm-up's routing: only served tokens are counted."""
        with self._lock:
            self._counts.zero_()
