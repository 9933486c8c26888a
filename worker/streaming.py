"""Server-sent event streams for ``/v1/generate`` and ``/v1/completions`` (``stream: true``).

One event per engine iteration that produced tokens for the request (several tokens coalesce
into one event when the client or the event loop is slower than the engine).  ``/v1/generate``
events carry ``tokens`` (how many tokens the event covers) so clients can time inter-token
latency exactly; the last event carries ``finish_reason``, ``usage`` and ``timings``.  A timeout
or failure after the first token ends the stream with an ``error`` event.  Every stream ends
with ``data: [DONE]``.  A client that disconnects cancels its request in the engine.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from worker.schemas import error_body, timings, usage

if TYPE_CHECKING:
    from worker.api import Pending, WorkerService

DONE = b"data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def _chunks(svc: WorkerService, p: Pending) -> AsyncIterator[tuple[str, int]]:
    """(text, tokens) per wake-up until the request finished (or the backstop timed out)."""
    tok = svc.runtime.tokenizer
    assert tok is not None
    decoder = tok.decoder()
    sent = 0
    backstop = svc.config.timeout_ms / 1000 + 5.0
    while True:
        if len(p.tokens) <= sent and p.finish is None:
            try:
                await asyncio.wait_for(p.wait(sent), backstop)
            except TimeoutError:
                return
        new = p.tokens[sent:]
        sent += len(new)
        if new:
            yield decoder.feed([t for t in new if t != tok.eos_id]), len(new)
        if p.finish is not None and sent >= len(p.tokens):
            tail = decoder.flush()
            if tail:
                yield tail, 0
            return


def _failure(svc: WorkerService, p: Pending) -> dict[str, Any] | None:
    ev = p.finish
    if ev is None:
        late: dict[str, Any] = error_body(504, f"no answer within timeout_ms={svc.config.timeout_ms}", "timeout")["error"]
        return late
    if ev.reason in ("timeout", "error", "abort"):
        status = {"timeout": 504, "error": 500, "abort": 503}[ev.reason]
        message = f"timed out after timeout_ms={svc.config.timeout_ms}" if ev.reason == "timeout" else ev.error or ev.reason
        failed: dict[str, Any] = error_body(status, message, ev.reason)["error"]
        return failed
    return None


async def generate_stream(svc: WorkerService, p: Pending, model: str) -> AsyncIterator[bytes]:
    try:
        async for text, n in _chunks(svc, p):
            yield sse({"id": p.request_id, "text": text, "tokens": n, "finish_reason": None})
        error = _failure(svc, p)
        if error is not None:
            yield sse({"id": p.request_id, "error": error})
        elif p.finish is not None:
            ev = p.finish
            yield sse({"id": p.request_id, "model": model, "text": "", "tokens": 0, "finish_reason": ev.reason,
                       "usage": usage(ev), "timings": timings(ev)})
        yield DONE
    finally:
        svc.cancel(p)


async def completion_stream(svc: WorkerService, p: Pending, model: str, include_usage: bool) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(text: str, finish: str | None) -> bytes:
        return sse({
            "id": p.request_id, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}],
        })

    try:
        async for text, _ in _chunks(svc, p):
            yield chunk(text, None)
        error = _failure(svc, p)
        if error is not None:
            yield sse({"error": error})
        elif p.finish is not None:
            yield chunk("", p.finish.reason)
            if include_usage:
                yield sse({"id": p.request_id, "object": "text_completion", "created": created, "model": model,
                           "choices": [], "usage": usage(p.finish)})
        yield DONE
    finally:
        svc.cancel(p)
