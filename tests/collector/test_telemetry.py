"""OpenTelemetry export, switched on by config: metrics and scrape spans reach an OTLP receiver."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from infermeter.config_file import load_settings
from tests.collector.targets import serve_targets
from tests.service import free_port, serve


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    received: dict[str, list[bytes]] = {"metrics": [], "traces": []}

    def handler(kind: str):  # type: ignore[no-untyped-def]
        async def receive(request: Request) -> Response:
            body = await request.body()
            if request.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            received[kind].append(body)
            return Response(b"", media_type="application/x-protobuf")

        return receive

    app = Starlette(routes=[Route("/v1/metrics", handler("metrics"), methods=["POST"]),
                            Route("/v1/traces", handler("traces"), methods=["POST"])])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_metrics_and_scrape_spans_are_exported_over_otlp(store_url: str, tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received), serve_targets() as (targets, _state):
        config = tmp_path / "infermeter.yaml"
        config.write_text(
            f"store:\n  url: {store_url}\ngpu:\n  nvml: 'off'\n"
            f"scrape:\n  interval: 300ms\n  timeout: 200ms\n  targets:\n    - job: vllm\n      urls: [{targets}/healthy]\n"
            f"telemetry:\n  otlp_endpoint: {endpoint}\n  export_interval: 300ms\n"
        )
        settings, _ = load_settings(str(config))
        with serve(settings, config_path=str(config)):
            time.sleep(2.0)
        # shutdown flushed the last batch of spans and metrics
    names: set[str] = set()
    for body in received["metrics"]:
        request = ExportMetricsServiceRequest.FromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                names.update(m.name for m in scope.metrics)
    assert {"infermeter.store.samples_appended", "infermeter.scrapes", "infermeter.scrape.loop_lag"} <= names
    spans = []
    for body in received["traces"]:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                spans.extend(scope.spans)
    scrape_spans = [s for s in spans if s.name == "scrape"]
    assert scrape_spans
    attrs = {a.key: a.value for a in scrape_spans[0].attributes}
    assert attrs["job"].string_value == "vllm" and attrs["up"].bool_value is True
