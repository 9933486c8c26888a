"""Request bodies and response shapes of the worker's HTTP API.

``POST /v1/generate`` is seed 004's shape (``{"prompt", "max_tokens"}`` plus ``temperature``,
``stream``); ``POST /v1/completions`` is OpenAI's, so load tools written for vLLM or OpenAI can
drive the worker.  Unknown fields are ignored (OpenAI clients send many); known fields are
validated, and a bad one answers 422 with ``error.param`` naming it.  ``max_tokens`` is also
checked against the context left after the prompt once the prompt is tokenised.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from worker.events import FinishEvent


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class GenerateBody(_Body):
    prompt: str
    max_tokens: int = Field(64, ge=1, le=1_048_576)
    temperature: float = Field(1.0, ge=0.0, le=10.0)
    stream: bool = False
    seed: int | None = Field(None, ge=0)
    # Keep generating past </s> (vLLM's ignore_eos): fixed output lengths for load tests.
    ignore_eos: bool = False


class StreamOptions(_Body):
    include_usage: bool = False


class CompletionBody(_Body):
    model: str | None = None
    prompt: str | list[str]
    max_tokens: int | None = Field(16, ge=1, le=1_048_576)
    temperature: float = Field(1.0, ge=0.0, le=10.0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    seed: int | None = Field(None, ge=0)
    n: int = Field(1, ge=1, le=1)
    ignore_eos: bool = False

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and len(value) != 1:
            raise ValueError("exactly one prompt per request")
        return value

    def prompt_text(self) -> str:
        return self.prompt[0] if isinstance(self.prompt, list) else self.prompt


def error_body(status: int, message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def usage(ev: FinishEvent) -> dict[str, int]:
    return {
        "prompt_tokens": ev.prompt_tokens,
        "completion_tokens": ev.completion_tokens,
        "total_tokens": ev.prompt_tokens + ev.completion_tokens,
    }


def timings(ev: FinishEvent) -> dict[str, float | None]:
    t = ev.timings
    end = t.finished if t.finished is not None else t.arrival

    def ms(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round((b - a) * 1000, 3)

    decode_s = (end - t.first_token) if t.first_token is not None else 0.0
    return {
        "queue_ms": ms(t.arrival, t.scheduled),
        "prefill_ms": round(t.prefill_s * 1000, 3),
        "ttft_ms": ms(t.arrival, t.first_token),
        "decode_ms": ms(t.first_token, end),
        "e2e_ms": ms(t.arrival, end),
        "decode_tokens_per_s": round((ev.completion_tokens - 1) / decode_s, 2) if decode_s > 0 else None,
    }
