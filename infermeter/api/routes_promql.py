"""Prometheus's HTTP query API, GET and POST (form body), so Grafana's Prometheus datasource
works pointed at infermeter: query, query_range, series, labels, label values, metadata,
status/buildinfo and runtimeinfo, query_exemplars and format_query.

Errors have Prometheus's shape: ``{"status": "error", "errorType": ..., "error": ...}`` with
400 ``bad_data`` (a bad parameter or expression, naming the position), 422 ``execution`` (the
expression failed while evaluating) and 503 ``timeout``.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from infermeter import __version__
from infermeter.api.deps import RuntimeDep
from infermeter.api.engine_proxy import forward
from infermeter.api.legacy_range import legacy_range
from infermeter.api.matrix_json import matrix_body
from infermeter.api.params import BadParam, parse_step_ms
from infermeter.api.prom_params import ApiError, Endpoint, Params, time_param
from infermeter.api.prom_params import get_and_post as register_both
from infermeter.api.routes_series import metric_names
from promql import EvalContext, ExprError, Vector
from promql import parse as parse_expr
from promql.aggregate import format_value
from promql.promql import to_promql
from promql.range_query import QueryTimeout, check_resolution, deadline_after, evaluate_range
from store.durations import parse_duration_ms
from store.read_warnings import collecting

if TYPE_CHECKING:
    from infermeter.runtime import Runtime

router = APIRouter(prefix="/api/v1", tags=["query"])
LEGACY = ("fn", "by", "agg", "quantile")  # infermeter's stepped-fold extension of query_range


def get_and_post(path: str) -> Callable[[Endpoint], Endpoint]:
    return register_both(router, path)


def _fmt(value: float) -> str:
    return format_value(float(value))


def _stamp(ms: int) -> float:
    return ms / 1000


def _expression(text: str | None) -> Any:
    if not text:
        raise ApiError("bad_data", 'invalid parameter "query": query must not be empty')
    try:
        return parse_expr(text)
    except ExprError as exc:
        line, col = exc.line_col(text)
        raise ApiError("bad_data", f'invalid parameter "query": {line}:{col}: parse error: {exc.message}') from None




def _timeout(params: Params, runtime: Runtime) -> float:
    limit: float = runtime.settings.query.timeout / 1000
    text = params.get("timeout")
    if text:
        try:
            asked = float(text) if text.replace(".", "", 1).isdigit() else parse_duration_ms(text) / 1000
        except ValueError:
            raise ApiError("bad_data", f'invalid parameter "timeout": cannot parse {text!r} to a valid duration') from None
        limit = min(limit, asked)
    return limit


async def _run(fn: Any, *args: Any) -> tuple[Any, list[str]]:
    """``fn(*args)`` off the event loop, with the warnings its reads raised (data they could
    not read, e.g. a cold-tier file gone: the answer is partial and says so)."""

    def call() -> tuple[Any, list[str]]:
        with collecting() as found:
            return fn(*args), found

    try:
        return await run_in_threadpool(call)
    except QueryTimeout as exc:
        raise ApiError("timeout", f"query timed out in expression evaluation: {exc}") from None
    except ExprError as exc:
        raise ApiError("execution", exc.message) from None


def _success(data: object, warnings: list[str]) -> JSONResponse:
    """The answer serialised at once (FastAPI's per-value encoder is slow on large matrices)."""
    return JSONResponse({"status": "success", "data": data, **({"warnings": warnings} if warnings else {})})


def _vector_json(value: Any, at_ms: int) -> dict[str, Any]:
    if isinstance(value, Vector):
        result = [{"metric": dict(labels), "value": [_stamp(at_ms), _fmt(v)]}
                  for labels, v in zip(value.labels, value.values.tolist())]
        return {"resultType": "vector", "result": result}
    if isinstance(value, str):
        return {"resultType": "string", "result": [_stamp(at_ms), value]}
    return {"resultType": "scalar", "result": [_stamp(at_ms), _fmt(float(value))]}


@get_and_post("/query")
async def query(request: Request, runtime: RuntimeDep) -> Any:
    """Instant query: full PromQL (``query``) at ``time`` (default now); ``timeout``."""
    try:
        params = await Params.of(request)
        if runtime.engine_client is not None:
            return await forward(runtime, "/api/v1/query", params)
        node = _expression(params.get("query"))
        now = runtime.clock.now_ms()
        at = time_param(params, "time", now, now)
        settings = runtime.settings.query
        ctx = EvalContext(runtime.source, at, settings.lookback_delta,
                          subquery_step_ms=settings.subquery_step, deadline=deadline_after(_timeout(params, runtime)))
        value, warnings = await _run(ctx.evaluate, node)
        return _success(_vector_json(value, at), warnings)
    except ApiError as exc:
        return exc.response()


@get_and_post("/query_range")
async def query_range(request: Request, runtime: RuntimeDep) -> Any:
    """Range query: PromQL evaluated at ``start + k*step`` up to and including ``end``, as
    Prometheus does (lookback ``query.lookback_delta``, staleness markers honoured, at most
    11,000 points per series). With ``fn`` / ``by`` / ``agg`` / ``quantile`` instead, the older
    infermeter extension: a selector folded per step in the store (rollups where they serve)."""
    try:
        params = await Params.of(request)
        if params.has_any(LEGACY):
            return await legacy_range(runtime, params)
        if runtime.engine_client is not None:
            return await forward(runtime, "/api/v1/query_range", params)
        node = _expression(params.get("query"))
        now = runtime.clock.now_ms()
        start = time_param(params, "start", now, None)
        end = time_param(params, "end", now, None)
        try:
            step = parse_step_ms("step", params.get("step"), 0)
        except BadParam as exc:
            raise ApiError("bad_data", f'invalid parameter "step": {exc}') from None
        try:
            check_resolution(start, end, step)
        except ExprError as exc:
            raise ApiError("bad_data", exc.message) from None
        settings = runtime.settings.query
        body, warnings = await _run(  # evaluated and written as JSON off the event loop
            lambda: matrix_body(evaluate_range(
                node, runtime.source, start, end, step, lookback_ms=settings.lookback_delta,
                subquery_step_ms=settings.subquery_step, max_samples=settings.max_samples,
                deadline=deadline_after(_timeout(params, runtime))))
        )
        if warnings:  # the body is one JSON object: the warnings go in before its closing brace
            body = body[: body.rindex(b"}")] + b',"warnings":' + json.dumps(warnings).encode() + b"}"
        return Response(body, media_type="application/json")
    except ApiError as exc:
        return exc.response()


@router.get("/metadata")
async def metadata(request: Request, runtime: RuntimeDep, metric: str | None = None, limit: int | None = None) -> Any:
    """Type, help and unit per metric family, for the names the store holds: what the scraped
    targets' HELP/TYPE/UNIT lines said, and the canonical set's (collector/mapping/canonical.py)
    for the names infermeter itself writes. A family described differently by two targets lists
    both, as Prometheus does."""
    from collector.mapping.canonical import CANONICAL

    if runtime.engine_client is not None:
        return await forward(runtime, "/api/v1/metadata", await Params.of(request))
    stored = await run_in_threadpool(metric_names, runtime)
    described: dict[str, set[tuple[str, str, str]]] = runtime.scrapes.metadata() if runtime.scrapes is not None else {}
    for family, meta in CANONICAL.items():
        described.setdefault(family, set()).add((meta.type, meta.help, meta.unit))
    data: dict[str, list[dict[str, str]]] = {}
    for family in sorted(described):
        kinds = {kind for kind, _, _ in described[family]}
        present = family in stored or any(f"{family}{suffix}" in stored for suffix in _SUFFIXES
                                          if kinds & _SUFFIXES[suffix])
        if present and (metric is None or metric == family):
            data[family] = [{"type": t, "help": h, "unit": u} for t, h, u in sorted(described[family])]
    if limit is not None and limit >= 0:
        data = dict(list(data.items())[:limit])
    return {"status": "success", "data": data}


# the series a family of each type is stored under besides its own name
_SUFFIXES: dict[str, set[str]] = {
    "_bucket": {"histogram", "gaugehistogram"}, "_count": {"histogram", "summary"}, "_total": {"counter"},
    "_info": {"info"},
}


@router.get("/status/buildinfo")
async def buildinfo() -> dict[str, Any]:
    """What Grafana reads to pick its query features: a Prometheus 2.42-compatible API."""
    return {"status": "success", "data": {
        "version": "2.42.0", "revision": f"infermeter-{__version__}", "branch": "infermeter",
        "buildUser": "infermeter", "buildDate": "", "goVersion": f"python{platform.python_version()}",
        "application": "infermeter", "infermeterVersion": __version__,
    }}


@router.get("/status/runtimeinfo")
async def runtimeinfo(runtime: RuntimeDep) -> dict[str, Any]:
    series_count = 0  # on the remote backend the engine's own status pages count its series
    if runtime.tsdb is not None:
        with runtime.tsdb.lock:
            series_count = len(runtime.tsdb.index)
    return {"status": "success", "data": {
        "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(runtime.started_at_ms / 1000)), "CWD": "",
        "reloadConfigSuccess": True,
        "lastConfigTime": "", "corruptionCount": 0, "goroutineCount": 0, "GOMAXPROCS": 0, "GOGC": "",
        "GODEBUG": "", "storageRetention": "", "seriesCount": series_count, "pythonVersion": sys.version.split()[0],
    }}


@get_and_post("/query_exemplars")
async def query_exemplars(request: Request, runtime: RuntimeDep) -> Any:
    """Exemplars are not stored: an empty result (what Prometheus answers without any)."""
    try:
        params = await Params.of(request)
        if runtime.engine_client is not None:
            return await forward(runtime, "/api/v1/query_exemplars", params)
        _expression(params.get("query"))
        return {"status": "success", "data": []}
    except ApiError as exc:
        return exc.response()


@get_and_post("/format_query")
async def format_query(request: Request) -> Any:
    """The expression, parsed and printed back in canonical form."""
    try:
        params = await Params.of(request)
        return {"status": "success", "data": to_promql(_expression(params.get("query")))}
    except ApiError as exc:
        return exc.response()


__all__ = ["router", "ApiError", "Params"]
