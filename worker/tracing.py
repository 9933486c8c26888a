"""OpenTelemetry spans per request: ``generate`` with children ``queue``, ``prefill``, ``decode``.

The engine only records timestamps (data); spans are built after the request finished, with
explicit start and end times, so tracing costs the engine thread nothing and a disabled tracer
costs nothing at all.  The parent is taken from an incoming W3C ``traceparent`` header.

Exporters (``worker.tracing.exporter``): ``none`` (default), ``console``, ``otlp`` (OTLP/HTTP to
``tracing.endpoint``); tests pass their own exporter (e.g. ``InMemorySpanExporter``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from worker.config import TracingConfig
from worker.events import FinishEvent


class RequestTracer:
    def __init__(self, provider: Any, clock_anchor_ns: int | None = None) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("infermeter.worker")
        # engine clock (monotonic seconds) -> epoch ns
        self._anchor = clock_anchor_ns if clock_anchor_ns is not None else time.time_ns() - time.monotonic_ns()

    def _ns(self, t: float) -> int:
        return self._anchor + int(t * 1e9)

    def record(self, ev: FinishEvent, *, model: str, route: str, headers: Mapping[str, str] | None = None) -> None:
        from opentelemetry import propagate, trace

        t = ev.timings
        end = t.finished if t.finished is not None else t.arrival
        parent = propagate.extract(dict(headers)) if headers else None
        root = self._tracer.start_span(
            "generate", context=parent, kind=trace.SpanKind.SERVER, start_time=self._ns(t.arrival),
            attributes={
                "http.route": route,
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": ev.prompt_tokens,
                "gen_ai.usage.output_tokens": ev.completion_tokens,
                "gen_ai.response.finish_reason": ev.reason,
                "infermeter.request_id": ev.request_id,
            },
        )
        if ev.reason in ("timeout", "error"):
            root.set_status(trace.Status(trace.StatusCode.ERROR, ev.error or ev.reason))
        ctx = trace.set_span_in_context(root)
        phases = (
            ("queue", t.arrival, t.scheduled if t.scheduled is not None else end),
            ("prefill", t.scheduled, t.first_token if t.first_token is not None else end),
            ("decode", t.first_token, end),
        )
        for name, start, stop in phases:
            if start is None:
                continue
            span = self._tracer.start_span(name, context=ctx, start_time=self._ns(start))
            if name == "decode":
                span.set_attribute("gen_ai.usage.output_tokens", ev.completion_tokens)
            if name == "prefill":
                span.set_attribute("gen_ai.usage.input_tokens", ev.prompt_tokens)
            span.end(end_time=self._ns(max(start, stop)))
        root.end(end_time=self._ns(end))

    def shutdown(self) -> None:
        self._provider.shutdown()


def make_tracer(config: TracingConfig, exporter: Any | None = None) -> RequestTracer | None:
    """A tracer for the configured exporter, or for ``exporter`` (tests); None when off."""
    if exporter is None and config.exporter == "none":
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif config.exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.endpoint)))
    return RequestTracer(provider)
