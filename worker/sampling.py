"""Next-token choice for a batch: greedy at temperature 0, else sampling from softmax(logits/T).

A request with a ``seed`` samples from its own generator, so its output does not depend on
what else shares the batch; the rest share the engine's generator (one multinomial call).
Token ids that must never be produced (BOS, PAD) are masked out first.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def sample(
    logits: torch.Tensor,
    temperatures: Sequence[float],
    generators: Sequence[torch.Generator | None],
    shared: torch.Generator,
    banned: Sequence[int] = (),
) -> list[int]:
    """One token id per row of ``logits`` ``[n, vocab]`` (float32)."""
    n = logits.shape[0]
    if banned:
        logits = logits.clone()
        logits[:, list(banned)] = float("-inf")
    out = logits.argmax(dim=-1).tolist()
    sampled = [i for i in range(n) if temperatures[i] > 0]
    if not sampled:
        return [int(t) for t in out]
    temps = torch.tensor([temperatures[i] for i in sampled], dtype=torch.float32, device=logits.device)
    probs = torch.softmax(logits[sampled] / temps[:, None], dim=-1)
    own = [j for j, i in enumerate(sampled) if generators[i] is not None]
    rest = [j for j, i in enumerate(sampled) if generators[i] is None]
    if rest:
        picks = torch.multinomial(probs[rest], 1, generator=shared)[:, 0].tolist()
        for j, tok in zip(rest, picks):
            out[sampled[j]] = tok
    for j in own:
        gen = generators[sampled[j]]
        out[sampled[j]] = int(torch.multinomial(probs[j], 1, generator=gen).item())
    return [int(t) for t in out]
