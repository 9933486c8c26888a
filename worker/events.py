"""What flows between the HTTP layer and the engine: requests in, token and finish events out.

Plain data, no torch: the API, metrics and tracing modules import these without loading a model.
Times are seconds of the engine's clock (monotonic unless a test injects another).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length", "timeout", "abort", "error"]
SubmitOutcome = Literal["accepted", "queue_full", "draining"]


@dataclass
class GenerationRequest:
    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    deadline: float  # clock seconds
    arrival: float
    temperature: float = 1.0
    seed: int | None = None
    ignore_eos: bool = False


@dataclass
class Timings:
    arrival: float
    scheduled: float | None = None  # first prefill chunk started
    first_token: float | None = None
    finished: float | None = None
    prefill_s: float = 0.0
    token_times: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class TokenEvent:
    request_id: str
    token_id: int
    t: float


@dataclass(frozen=True)
class FinishEvent:
    request_id: str
    reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    timings: Timings
    error: str | None = None


Event = TokenEvent | FinishEvent


@dataclass(frozen=True)
class EngineStats:
    running: int
    waiting: int
    kv_tokens: int
    kv_capacity_tokens: int
    steps: int

    @property
    def kv_usage(self) -> float:
        return self.kv_tokens / self.kv_capacity_tokens if self.kv_capacity_tokens else 0.0
