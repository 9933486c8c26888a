"""One timed request over HTTP (httpx, async), streaming or not; failures become a cause.

Causes: ``timeout`` (504, a stream's timeout event, or the client's own timeout), ``rejected``
(429), ``unavailable`` (503), ``invalid`` (400/422), ``client_error`` (other 4xx),
``server_error`` (5xx or a stream error event), ``connect`` (no connection), ``transport``
(broken connection), ``protocol`` (an answer that does not parse).

Timing: TTFT is the first event that carries tokens; each later event's gap is split evenly
over the tokens it carries (the worker's events say how many; an OpenAI chunk counts as one),
and tokens that arrive with the first one count as a gap of 0 -- so a request of n tokens has
n - 1 inter-token gaps, as the client saw them.
Without streaming, TTFT and inter-token latency come from the worker's ``timings`` when the
answer has them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

Endpoint = Literal["generate", "completions", "chat"]
PATHS: dict[Endpoint, str] = {"generate": "/v1/generate", "completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass
class RequestResult:
    ok: bool
    start_s: float
    e2e_s: float
    cause: str | None = None
    status: int | None = None
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    detail: str = ""


def cause_of_status(status: int) -> str:
    if status == 429:
        return "rejected"
    if status == 504:
        return "timeout"
    if status == 503:
        return "unavailable"
    if status in (400, 422):
        return "invalid"
    return "client_error" if 400 <= status < 500 else "server_error"


def _stream_error_cause(error: dict[str, Any]) -> str:
    kind = str(error.get("type", ""))
    return {"timeout": "timeout", "abort": "unavailable"}.get(kind, "server_error")


def request_body(endpoint: Endpoint, prompt: str, max_tokens: int, *, stream: bool, temperature: float,
                 ignore_eos: bool, model: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                            "stream": stream, "ignore_eos": ignore_eos}
    if endpoint == "chat":  # OpenAI chat: the prompt as one user message
        body["messages"] = [{"role": "user", "content": body.pop("prompt")}]
    if endpoint in ("completions", "chat"):
        body["model"] = model or "ref-tiny"
        if stream:
            body["stream_options"] = {"include_usage": True}
    return body


async def send(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    body: dict[str, Any],
    *,
    start_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> RequestResult:
    """POST ``body``; never raises for HTTP or transport problems (they are the result)."""
    t0 = clock()
    prompt = body.get("prompt") or "".join(m.get("content", "") for m in body.get("messages", []))
    result = RequestResult(ok=False, start_s=start_s, e2e_s=0.0, prompt_tokens=len(prompt))
    try:
        if body.get("stream"):
            await _streamed(client, endpoint, body, result, t0, clock)
        else:
            await _plain(client, endpoint, body, result, t0)
    except httpx.TimeoutException as exc:
        result.cause, result.detail = "timeout", f"client timeout ({type(exc).__name__})"
    except httpx.ConnectError as exc:
        result.cause, result.detail = "connect", str(exc) or type(exc).__name__
    except httpx.HTTPError as exc:
        result.cause, result.detail = "transport", str(exc) or type(exc).__name__
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        result.cause, result.detail = "protocol", f"{type(exc).__name__}: {exc}"
    result.e2e_s = clock() - t0
    result.ok = result.cause is None
    return result


async def _plain(client: httpx.AsyncClient, endpoint: Endpoint, body: dict[str, Any], result: RequestResult,
                 t0: float) -> None:
    response = await client.post(PATHS[endpoint], json=body)
    result.status = response.status_code
    if response.status_code != 200:
        result.cause, result.detail = cause_of_status(response.status_code), response.text[:200]
        return
    data = response.json()
    use = data.get("usage") or {}
    result.prompt_tokens = int(use.get("prompt_tokens", result.prompt_tokens))
    result.output_tokens = int(use.get("completion_tokens", 0))
    timings = data.get("timings") or {}
    if timings.get("ttft_ms") is not None:
        result.ttft_s = timings["ttft_ms"] / 1000
        if result.output_tokens > 1 and timings.get("decode_ms") is not None:
            per = timings["decode_ms"] / 1000 / (result.output_tokens - 1)
            result.itl_s = [per] * (result.output_tokens - 1)


async def _streamed(client: httpx.AsyncClient, endpoint: Endpoint, body: dict[str, Any], result: RequestResult,
                    t0: float, clock: Callable[[], float]) -> None:
    async with client.stream("POST", PATHS[endpoint], json=body) as response:
        result.status = response.status_code
        if response.status_code != 200:
            text = (await response.aread()).decode("utf-8", "replace")
            result.cause, result.detail = cause_of_status(response.status_code), text[:200]
            return
        last: float | None = None
        tokens = 0
        usage: dict[str, Any] | None = None
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            event = json.loads(payload)
            now = clock()
            if "error" in event:
                result.cause, result.detail = _stream_error_cause(event["error"]), str(event["error"].get("message"))
                break
            if event.get("usage"):
                usage = event["usage"]
            if endpoint == "generate":
                n = int(event.get("tokens", 0))
            elif endpoint == "chat":  # a delta with content is a token; the first delta only names the role
                choices = event.get("choices") or []
                n = 1 if choices and (choices[0].get("delta") or {}).get("content") else 0
            else:
                choices = event.get("choices") or []
                n = 1 if choices and (choices[0].get("text") or choices[0].get("finish_reason") is None) else 0
            if n <= 0:
                continue
            if last is None:
                result.ttft_s = now - t0
                result.itl_s.extend([0.0] * (n - 1))  # delivered together with the first token
            else:
                result.itl_s.extend([(now - last) / n] * n)
            last = now
            tokens += n
        result.output_tokens = tokens
        if usage is not None:
            result.prompt_tokens = int(usage.get("prompt_tokens", result.prompt_tokens))
            result.output_tokens = int(usage.get("completion_tokens", tokens))
