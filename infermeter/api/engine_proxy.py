"""On the remote backend the Prometheus query API is the engine's: ``/api/v1/query``,
``query_range``, ``series``, ``labels``, label values, metadata and exemplars are forwarded with
their parameters (GET or form POST) through the runtime's engine client (its pooled
connections), and the engine's answer is returned as it is, so Grafana and scripts get full
PromQL of the engine through infermeter's address. An unreachable engine is a 503 in
Prometheus's error shape naming it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from infermeter.api.prom_params import Params
from remote.client import EngineError

if TYPE_CHECKING:
    from infermeter.runtime import Runtime


async def forward(runtime: Runtime, path: str, params: Params) -> Response:
    client = runtime.engine_client
    assert client is not None
    try:
        reply = await run_in_threadpool(client.post, path, params.pairs)
    except EngineError as exc:
        return JSONResponse({"status": "error", "errorType": "unavailable", "error": str(exc)}, status_code=503)
    kind = reply.headers.get("content-type")
    return Response(reply.content, status_code=reply.status_code, headers={"content-type": kind} if kind else None)
