"""What to send: token-length distributions, prompt text, and request specs (synthetic or from
a trace).  Randomness comes from an injected ``random.Random``; nothing reads a clock.

Length specs (``--prompt-tokens`` / ``--output-tokens``):
``128`` fixed; ``64-256`` uniform integers; ``normal:MEAN:STD``; ``lognormal:MEDIAN:SIGMA``;
``exp:MEAN`` -- all clipped to ``[1, max]``.

Prompts are ASCII, one character per token on the worker's byte-level tokenizer (other
tokenizers count differently; the report uses the token counts the server returns when it
returns them).  Trace prompts built from Mooncake ``hash_ids`` repeat the same text for the
same block id, so shared prefixes stay shared.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from worker.loadgen.traces import Trace

WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an which have not but all "
    "gpu token cache batch model infer serve queue decode prefill latency memory bandwidth node fleet cost"
).split()
BLOCK_TOKENS = 512


@dataclass(frozen=True)
class LengthDist:
    kind: str
    a: float
    b: float = 0.0
    spec: str = ""

    @classmethod
    def parse(cls, spec: str | int) -> LengthDist:
        text = str(spec).strip()
        try:
            if text.isdigit():
                return cls("fixed", float(text), spec=text)
            if "-" in text and ":" not in text:
                lo, hi = (float(x) for x in text.split("-", 1))
                if lo > hi:
                    raise ValueError("low > high")
                return cls("uniform", lo, hi, text)
            kind, *args = text.split(":")
            params = [float(x) for x in args]
            if kind in ("uniform", "normal", "lognormal") and len(params) == 2:
                return cls(kind, params[0], params[1], text)
            if kind == "exp" and len(params) == 1:
                return cls(kind, params[0], spec=text)
        except ValueError as exc:
            raise ValueError(f"bad length spec {text!r}: {exc}") from exc
        raise ValueError(f"bad length spec {text!r}: use N, A-B, normal:MEAN:STD, lognormal:MEDIAN:SIGMA or exp:MEAN")

    def sample(self, rng: random.Random, maximum: int = 1 << 30) -> int:
        if self.kind == "fixed":
            value = self.a
        elif self.kind == "uniform":
            value = rng.randint(int(self.a), int(self.b))
        elif self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        elif self.kind == "lognormal":
            value = self.a * math.exp(rng.gauss(0.0, self.b))
        else:
            value = rng.expovariate(1.0 / self.a)
        return max(1, min(maximum, int(round(value))))

    @property
    def mean(self) -> float:
        return {
            "fixed": self.a, "uniform": (self.a + self.b) / 2, "normal": self.a,
            "lognormal": self.a * math.exp(self.b**2 / 2), "exp": self.a,
        }[self.kind]


@dataclass(frozen=True)
class RequestSpec:
    prompt_tokens: int
    output_tokens: int
    at_s: float | None = None  # open loop / trace: when to send, from the start
    blocks: tuple[int, ...] = ()


def make_prompt(n_tokens: int, rng: random.Random, blocks: tuple[int, ...] = ()) -> str:
    """``n_tokens`` ASCII characters: shared blocks first (text fixed by block id), then words."""
    parts: list[str] = []
    size = 0
    for block in blocks:
        if size + BLOCK_TOKENS > n_tokens:
            break
        parts.append(_words(random.Random(block), BLOCK_TOKENS))
        size += BLOCK_TOKENS
    if size < n_tokens:
        parts.append(_words(rng, n_tokens - size))
    return "".join(parts)[:n_tokens]


def _words(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        word = rng.choice(WORDS) + " "
        out.append(word)
        size += len(word)
    return "".join(out)[:n]


def synthetic(prompt: LengthDist, output: LengthDist, rng: random.Random, max_context: int) -> Iterator[RequestSpec]:
    """Endless specs with lengths from the distributions, fitted into ``max_context``."""
    while True:
        out = output.sample(rng, max(1, max_context // 2))
        yield RequestSpec(prompt.sample(rng, max(1, max_context - out - 1)), out)


def poisson_arrivals(rate: float, rng: random.Random) -> Iterator[float]:
    """Arrival times (s from the start) of a Poisson process of ``rate`` requests/s."""
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        yield t


def from_trace(trace: Trace, *, speedup: float, max_context: int) -> tuple[list[RequestSpec], int]:
    """Specs at the trace's arrival times divided by ``speedup``, lengths fitted into
    ``max_context``; also how many records had to be shortened."""
    specs: list[RequestSpec] = []
    clipped = 0
    for rec in trace.records:
        out = min(rec.output_tokens, max(1, max_context // 2))
        prompt = min(rec.prompt_tokens, max(1, max_context - out - 1))
        clipped += (out, prompt) != (rec.output_tokens, rec.prompt_tokens)
        specs.append(RequestSpec(prompt, out, rec.at_s / speedup, rec.blocks))
    return specs, clipped
