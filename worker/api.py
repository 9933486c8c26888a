"""The worker's HTTP API (FastAPI): generate, OpenAI completions, health, metrics, models.

Status codes: 200; 422 for a bad body (``error.param`` names the field; bad JSON names
``body``); 429 with ``Retry-After`` when ``max_batch_size + max_waiting_requests`` requests are
already in the system; 503 while loading (health says why) or draining; 504 when the request
passed ``timeout_ms`` (the engine drops it at its deadline, in the queue or mid-generation);
500 when the model failed.  Streaming (server-sent events) waits for the first token before
sending headers, so a timeout or error before it still gets its status code; one after it
ends the stream with an ``error`` event.

Token events cross from the engine thread to the event loop once per engine iteration
(:class:`Dispatcher`); a request's handler wakes at most once per iteration, whatever the
batch size.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worker.config import WorkerConfig
from worker.events import Event, FinishEvent, GenerationRequest, TokenEvent
from worker.metrics import WorkerMetrics
from worker.runtime import WorkerRuntime
from worker.schemas import CompletionBody, GenerateBody, error_body, timings, usage
from worker.streaming import completion_stream, generate_stream
from worker.tracing import RequestTracer, make_tracer

log = logging.getLogger("worker.api")
STATUS_OF = {"timeout": 504, "error": 500, "abort": 503}
ROUTES = ("/v1/generate", "/v1/completions", "/v1/models")


class Pending:
    """One admitted request as the handler sees it: tokens so far, and the finish event."""

    __slots__ = ("request_id", "prompt_tokens", "max_tokens", "route", "headers", "tokens", "finish",
                 "event", "counted")

    def __init__(self, request_id: str, prompt_tokens: int, max_tokens: int, route: str, headers: dict[str, str]) -> None:
        self.request_id, self.prompt_tokens, self.max_tokens = request_id, prompt_tokens, max_tokens
        self.route, self.headers = route, headers
        self.tokens: list[int] = []
        self.finish: FinishEvent | None = None
        self.event = asyncio.Event()
        self.counted = False

    async def wait(self, have: int) -> None:
        """Until there are more than ``have`` tokens or the request finished."""
        while len(self.tokens) <= have and self.finish is None:
            await self.event.wait()
            self.event.clear()


class Dispatcher:
    """Engine thread -> event loop: one ``call_soon_threadsafe`` per engine iteration."""

    def __init__(self, metrics: WorkerMetrics, tracer: RequestTracer | None, model: str) -> None:
        self.metrics, self.tracer, self.model = metrics, tracer, model
        self.pending: dict[str, Pending] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.mean_e2e_s = 1.0

    def emit(self, events: list[Event]) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.dispatch, events)

    def dispatch(self, events: list[Event]) -> None:
        generated = prompt = 0
        for ev in events:
            p = self.pending.get(ev.request_id)
            if isinstance(ev, TokenEvent):
                generated += 1
                if p is not None:
                    if not p.counted:
                        p.counted, prompt = True, prompt + p.prompt_tokens
                    p.tokens.append(ev.token_id)
                    p.event.set()
                continue
            self.pending.pop(ev.request_id, None)
            max_tokens = p.max_tokens if p is not None else ev.completion_tokens
            try:
                self.metrics.finished(ev, max_tokens)
                if self.tracer is not None and p is not None:
                    self.tracer.record(ev, model=self.model, route=p.route, headers=p.headers)
            except Exception:
                log.exception("recording request %s failed", ev.request_id)
            if ev.timings.finished is not None:
                self.mean_e2e_s = 0.8 * self.mean_e2e_s + 0.2 * (ev.timings.finished - ev.timings.arrival)
            if p is not None:
                p.finish = ev
                p.event.set()
        self.metrics.tokens(prompt, generated)


class WorkerService:
    """What the routes share: config, runtime, dispatcher, metrics, tracer."""

    def __init__(
        self, config: WorkerConfig, *, gate: threading.Event | None = None, span_exporter: Any | None = None,
        on_failed: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config, self.clock = config, clock
        self.tracer = make_tracer(config.tracing, span_exporter)
        self.runtime = WorkerRuntime(config, self._emit, clock=clock, gate=gate, on_failed=on_failed)
        self.metrics = WorkerMetrics(
            config.model_name, config.max_context_length, self.runtime.stats, expert_counts=self.runtime.expert_counts
        )
        self.dispatcher = Dispatcher(self.metrics, self.tracer, config.model_name)
        self._ids = itertools.count(1)
        self._prefix = f"{os.getpid():x}{int(time.time()) & 0xFFFF:04x}"

    def _emit(self, events: list[Event]) -> None:
        self.dispatcher.emit(events)

    def new_id(self, kind: str) -> str:
        return f"{kind}-{self._prefix}{next(self._ids):08x}"

    def error(self, status: int, message: str, kind: str, param: str | None = None, cause: str | None = None,
              retry_after: int | None = None) -> JSONResponse:
        if cause is not None:
            self.metrics.failed(cause)
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        return JSONResponse(error_body(status, message, kind, param), status_code=status, headers=headers)

    def retry_after(self) -> int:
        stats = self.runtime.stats()
        waiting = stats.waiting if stats is not None else 0
        est = self.dispatcher.mean_e2e_s * (1 + waiting / max(1, self.config.max_batch_size))
        return max(1, min(60, math.ceil(est)))

    def admit(self, prompt: str, max_tokens: int | None, temperature: float, seed: int | None, ignore_eos: bool,
              route: str, headers: dict[str, str]) -> Pending | JSONResponse:
        rt = self.runtime
        if not rt.ready or rt.engine is None or rt.tokenizer is None:
            if rt.state in ("draining", "stopped"):
                return self.error(503, "the worker is draining", "unavailable", cause="draining", retry_after=1)
            return self.error(503, f"the worker is not ready ({rt.state})", "unavailable", cause="not_ready", retry_after=5)
        ids = rt.tokenizer.encode(prompt)
        if not ids:
            ids = [rt.bos_id]
        room = rt.max_context - len(ids)
        if room < 1:
            return self.error(422, f"the prompt has {len(ids)} tokens; max_context_length is {rt.max_context}",
                              "invalid_request_error", "prompt", cause="invalid_request")
        limit = min(self.config.max_tokens_limit, room)
        if max_tokens is None:
            max_tokens = limit
        if max_tokens > limit:
            return self.error(
                422, f"max_tokens must be at most {limit} (max_context_length {rt.max_context} - {len(ids)} prompt "
                f"tokens, max_tokens_limit {self.config.max_tokens_limit}), got {max_tokens}",
                "invalid_request_error", "max_tokens", cause="invalid_request",
            )
        now = self.clock()
        rid = self.new_id("cmpl" if route == "/v1/completions" else "gen")
        trace_headers = {k: v for k, v in headers.items() if k in ("traceparent", "tracestate")}
        pending = Pending(rid, len(ids), max_tokens, route, trace_headers)
        self.dispatcher.pending[rid] = pending
        outcome = rt.engine.submit(GenerationRequest(
            rid, ids, max_tokens, deadline=now + self.config.timeout_ms / 1000, arrival=now,
            temperature=temperature, seed=seed, ignore_eos=ignore_eos,
        ))
        if outcome == "accepted":
            return pending
        self.dispatcher.pending.pop(rid, None)
        if outcome == "queue_full":
            return self.error(429, "the queue is full; retry later", "rate_limit_error", cause="queue_full",
                              retry_after=self.retry_after())
        return self.error(503, "the worker is draining", "unavailable", cause="draining", retry_after=1)

    async def wait_first(self, p: Pending) -> bool:
        """Wait for the first token (or the end); False if even the backstop timed out."""
        try:
            await asyncio.wait_for(p.wait(0), self.config.timeout_ms / 1000 + 5.0)
            return True
        except TimeoutError:
            self.cancel(p)
            return False

    async def wait_finish(self, p: Pending, request: Request | None = None) -> bool:
        """Wait for the end; a client that went away cancels its request (checked each second).
        False if even the backstop (timeout_ms + 5 s) passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.timeout_ms / 1000 + 5.0
        while p.finish is None:
            left = deadline - loop.time()
            if left <= 0:
                self.cancel(p)
                return False
            try:
                await asyncio.wait_for(p.wait(len(p.tokens)), min(left, 1.0))
            except TimeoutError:
                if request is not None and await request.is_disconnected():
                    self.cancel(p)
        return True

    def cancel(self, p: Pending) -> None:
        if p.finish is None and self.runtime.engine is not None:
            self.runtime.engine.cancel(p.request_id)

    def failure_response(self, p: Pending) -> JSONResponse | None:
        ev = p.finish
        if ev is None:
            return self.error(504, f"no answer within timeout_ms={self.config.timeout_ms}", "timeout")
        status = STATUS_OF.get(ev.reason)
        if status is None:
            return None
        if ev.reason == "timeout":
            message = (f"timed out after timeout_ms={self.config.timeout_ms} with {ev.completion_tokens} of "
                       f"{p.max_tokens} tokens generated")
        else:
            message = ev.error or ev.reason
        return self.error(status, message, ev.reason)

    def decode_all(self, tokens: list[int]) -> str:
        tok = self.runtime.tokenizer
        return tok.decode([t for t in tokens if t != tok.eos_id]) if tok is not None else ""


def create_app(
    config: WorkerConfig, *, gate: threading.Event | None = None, span_exporter: Any | None = None,
    on_failed: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """The worker app. Loading starts with the lifespan; ``gate`` holds it back (tests)."""
    svc = WorkerService(config, gate=gate, span_exporter=span_exporter, on_failed=on_failed, clock=clock)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc.dispatcher.loop = asyncio.get_running_loop()
        svc.runtime.start()
        yield
        await asyncio.to_thread(svc.runtime.shutdown, config.drain_ms / 1000)
        if svc.tracer is not None:
            svc.tracer.shutdown()

    app = FastAPI(title="infermeter reference worker", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.worker = svc

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors: list[dict[str, Any]] = jsonable_encoder(exc.errors())
        first: dict[str, Any] = errors[0] if errors else {"loc": ["body"], "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", [])]
        if first.get("type") == "json_invalid":
            ctx: dict[str, Any] = first.get("ctx") or {}
            param, message = "body", f"invalid JSON: {ctx.get('error', first.get('msg'))}"
        else:
            param = ".".join(loc[1:]) if loc[:1] == ["body"] and len(loc) > 1 else ".".join(loc) or "body"
            message = f"{param}: {first.get('msg')}"
        svc.metrics.failed("invalid_request")
        body = error_body(422, message, "invalid_request_error", param)
        body["detail"] = errors
        return JSONResponse(body, status_code=422)

    @app.get(config.health_check_path)
    async def health() -> JSONResponse:
        rt = svc.runtime
        if rt.ready:
            info = rt.info.__dict__ if rt.info is not None else {}
            return JSONResponse({"status": "ok", **info})
        body = {"status": rt.state, "error": rt.error}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "5"} if rt.state != "failed" else None)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(svc.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/version")
    async def version() -> JSONResponse:
        """vLLM's ``/version``, naming this engine, so collectors learn what runs here (the installed
        distribution's version: the worker imports nothing of the service's)."""
        import importlib.metadata

        try:
            version = importlib.metadata.version("infermeter")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return JSONResponse({"version": version, "engine": "infermeter-worker"})

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{
            "id": config.model_name, "object": "model", "created": 0, "owned_by": "infermeter",
            "max_model_len": svc.runtime.max_context,
        }]})

    @app.post("/v1/generate", response_model=None)
    async def generate(body: GenerateBody, request: Request) -> Response:
        p = svc.admit(body.prompt, body.max_tokens, body.temperature, body.seed, body.ignore_eos,
                      "/v1/generate", dict(request.headers))
        if isinstance(p, JSONResponse):
            return p
        if body.stream:
            if not await svc.wait_first(p):
                return svc.error(504, f"no answer within timeout_ms={config.timeout_ms}", "timeout")
            if not p.tokens and (failure := svc.failure_response(p)) is not None:
                return failure
            return StreamingResponse(generate_stream(svc, p, config.model_name), media_type="text/event-stream")
        if not await svc.wait_finish(p, request) or (failure := svc.failure_response(p)) is not None:
            return failure or svc.error(504, "timed out", "timeout")
        ev = p.finish
        assert ev is not None
        return JSONResponse({
            "id": p.request_id, "object": "generation", "model": config.model_name,
            "text": svc.decode_all(p.tokens), "finish_reason": ev.reason, "usage": usage(ev), "timings": timings(ev),
        })

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionBody, request: Request) -> Response:
        p = svc.admit(body.prompt_text(), body.max_tokens, body.temperature, body.seed, body.ignore_eos,
                      "/v1/completions", dict(request.headers))
        if isinstance(p, JSONResponse):
            return p
        if body.stream:
            if not await svc.wait_first(p):
                return svc.error(504, f"no answer within timeout_ms={config.timeout_ms}", "timeout")
            if not p.tokens and (failure := svc.failure_response(p)) is not None:
                return failure
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(completion_stream(svc, p, config.model_name, include_usage),
                                     media_type="text/event-stream")
        if not await svc.wait_finish(p, request) or (failure := svc.failure_response(p)) is not None:
            return failure or svc.error(504, "timed out", "timeout")
        ev = p.finish
        assert ev is not None
        return JSONResponse({
            "id": p.request_id, "object": "text_completion", "created": int(time.time()), "model": config.model_name,
            "choices": [{"index": 0, "text": svc.decode_all(p.tokens), "logprobs": None,
                         "finish_reason": ev.reason, "stop_reason": None}],
            "usage": usage(ev),
        })

    app.add_middleware(HttpMetricsMiddleware, metrics=svc.metrics)
    return app


class HttpMetricsMiddleware:
    """``http_requests_total`` for the API routes (pure ASGI: no buffering of streams)."""

    def __init__(self, app: ASGIApp, metrics: WorkerMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path not in ROUTES:
            await self.app(scope, receive, send)
            return
        status = 500

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.metrics.http_request(path, str(scope.get("method", "")), status)
