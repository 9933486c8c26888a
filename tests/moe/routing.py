"""Helpers of the MoE tests: what a noisy top-k router over Zipf shares picks, computed apart from
the worker's code (numpy Gumbel top-k), and a decoder in MoE mode fed random prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from moe.balance import shares
from worker.moe import zipf_shares


def expected_shares(experts: int, top_k: int, skew: float, draws: int = 200_000, seed: int = 7) -> list[float]:
    """Share of routed tokens per expert when each token picks top_k experts without replacement
    with probabilities zipf_shares (Gumbel top-k), by simulation."""
    rng = np.random.default_rng(seed)
    logits = np.log(np.array(zipf_shares(experts, skew)))
    keys = logits + rng.gumbel(size=(draws, experts))
    chosen = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
    return shares(np.bincount(chosen.ravel(), minlength=experts).tolist())


def routed_counts(model_dir: Path, *, experts: int, top_k: int, skew: float, rounds: int, tokens_per_round: int,
                  seed: int = 0) -> list[list[list[int]]]:
    """A ref-tiny decoder in MoE mode prefilling random prompts: the router's counts after each
    round (cumulative, as the worker exports them)."""
    import torch

    from worker.model import LlamaDecoder
    from worker.moe import ExpertRouter
    from worker.weights import load_tensors, locate_model

    loc = locate_model("ref-tiny", model_dir, 0)
    shape = loc.shape
    router = ExpertRouter(layers=shape.num_layers, hidden=shape.hidden_size, intermediate=shape.intermediate_size,
                          experts=experts, top_k=top_k, skew=skew, seed=seed, device=torch.device("cpu"),
                          dtype=torch.float32)
    decoder = LlamaDecoder(shape, load_tensors(loc.directory, "cpu", torch.float32), device=torch.device("cpu"),
                           dtype=torch.float32, router=router)
    rng = np.random.default_rng(seed)
    cache = decoder.new_cache(1, 256)
    snapshots = []
    for _ in range(rounds):
        left = tokens_per_round
        while left > 0:
            n = min(128, left)
            decoder.prefill(cache, 0, rng.integers(3, shape.vocab_size, n).tolist(), 0)
            left -= n
        snapshots.append(router.counts())
    return snapshots
