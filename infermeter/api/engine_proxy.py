"""On the remote backend the Prometheus query API is the engine's: ``/api/v1/query``,
``query_range``, ``series``, ``labels``, label values, metadata and exemplars are forwarded with
their parameters (GET or form POST) and the engine's answer is returned as it is, so Grafana and
scripts get full PromQL of the engine through infermeter's address. An unreachable engine is a
503 in Prometheus's error shape naming it."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

import httpx
from fastapi.responses import JSONResponse, Response

from infermeter.api.prom_params import Params

if TYPE_CHECKING:
    from infermeter.runtime import Runtime

_PASSED_HEADERS = ("content-type", "content-encoding")
_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def forward(runtime: Runtime, path: str, params: Params) -> Response:
    client = runtime.engine_client
    assert client is not None
    remote = runtime.settings.store.remote
    url = client.query_url + path
    try:
        async with httpx.AsyncClient(headers=remote.headers, timeout=remote.timeout / 1000) as http:
            reply = await http.post(url, content=urlencode(params.pairs), headers=_FORM)
    except httpx.HTTPError as exc:
        body = {"status": "error", "errorType": "unavailable", "error": f"engine at {url} unreachable: {type(exc).__name__}: {exc}"}
        return JSONResponse(body, status_code=503)
    headers = {k: v for k, v in reply.headers.items() if k.lower() in _PASSED_HEADERS}
    headers.pop("content-encoding", None)  # httpx has already decoded the body
    return Response(reply.content, status_code=reply.status_code, headers=headers)
