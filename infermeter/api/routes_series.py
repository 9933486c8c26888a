"""Series, label names and label values (``/api/v1/series``, ``/labels``, ``/label/<n>/values``).

Listing can be large (a million series): the selection and the JSON body are both built on a
worker thread, so the event loop (``/health``, ingest, other queries) never waits for them, and
``limit`` (as in Prometheus 2.51+) caps the answer with a warning when it truncates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from infermeter.api.deps import RuntimeDep
from infermeter.api.engine_proxy import forward
from infermeter.api.prom_params import ApiError, Params, get_and_post, time_param
from store.selector_text import SelectorError, parse_selector
from store.series_index import Selector
from store.types import SeriesKey

if TYPE_CHECKING:
    from infermeter.runtime import Runtime

router = APIRouter(prefix="/api/v1", tags=["query"])


def _selectors(params: Params, required: bool) -> list[Selector]:
    texts = params.all("match[]")
    if required and not texts:
        raise ApiError("bad_data", "no match[] parameter provided")
    out = []
    for text in texts:
        try:
            out.append(parse_selector(text))
        except SelectorError as exc:
            raise ApiError("bad_data", f'invalid parameter "match[]": {exc}') from None
    return out


def _limit(params: Params) -> int:
    text = params.get("limit")
    if text is None or text == "":
        return 0
    try:
        value = int(text)
    except ValueError:
        raise ApiError("bad_data", f'invalid parameter "limit": cannot parse {text!r} to an integer') from None
    if value < 0:
        raise ApiError("bad_data", 'invalid parameter "limit": must be 0 or more') from None
    return value


def _matching(runtime: Runtime, params: Params, required: bool) -> list[dict[str, str]] | None:
    """The label sets of the series any ``match[]`` selects (None without match[]); with
    ``start``/``end``, only series that have samples in that range."""
    selectors = _selectors(params, required)
    if not selectors:
        return None
    now = runtime.clock.now_ms()
    start = time_param(params, "start", now, -(1 << 62))
    end = time_param(params, "end", now, 1 << 62)
    bounded = params.get("start") is not None or params.get("end") is not None
    seen: dict[int, dict[str, str]] = {}
    for sel in selectors:
        found = runtime.reader.active(sel, max(start, 0), end) if bounded else runtime.reader.select(sel)
        for sid, key in found:
            seen[sid] = {"__name__": key.name, **key.labels_dict()}
    return [seen[sid] for sid in sorted(seen)]


def _all_keys(runtime: Runtime) -> list[SeriesKey]:
    tsdb = runtime.tsdb
    assert tsdb is not None  # the remote backend forwards before reaching here
    with tsdb.lock:
        return tsdb.index.keys()


def metric_names(runtime: Runtime) -> set[str]:
    tsdb = runtime.tsdb
    assert tsdb is not None
    with tsdb.lock:
        return set(tsdb.index.metrics())


def _answer(data: list[Any], limit: int) -> bytes:
    body: dict[str, Any] = {"status": "success", "data": data}
    if limit and len(data) > limit:
        body["data"] = data[:limit]
        body["warnings"] = [f"results truncated due to limit ({limit})"]
    return json.dumps(body, separators=(",", ":")).encode()


async def _listing(request: Request, runtime: Runtime, path: str,
                   build: Callable[[Runtime, Params], list[Any]]) -> Response:
    """Forward to the engine (remote backend), or build and encode the list on a thread."""
    try:
        params = await Params.of(request)
        if runtime.engine_client is not None:
            forwarded: Response = await forward(runtime, path, params)
            return forwarded
        limit = _limit(params)
        body = await run_in_threadpool(lambda: _answer(build(runtime, params), limit))
        return Response(body, media_type="application/json")
    except ApiError as exc:
        return exc.response()


def _series(runtime: Runtime, params: Params) -> list[Any]:
    return _matching(runtime, params, True) or []


def _label_names(runtime: Runtime, params: Params) -> list[Any]:
    found = _matching(runtime, params, False)
    if found is None:
        return sorted({"__name__"} | {name for key in _all_keys(runtime) for name, _ in key.labels})
    return sorted({name for labels in found for name in labels})


def _values_of(name: str) -> Callable[[Runtime, Params], list[Any]]:
    def values(runtime: Runtime, params: Params) -> list[Any]:
        found = _matching(runtime, params, False)
        if found is not None:
            return sorted({labels.get(name, "") for labels in found} - {""})
        if name == "__name__":
            return sorted(metric_names(runtime))
        return sorted({key.get(name) for key in _all_keys(runtime)} - {""})

    return values


@get_and_post(router, "/series")
async def series(request: Request, runtime: RuntimeDep) -> Response:
    """Label sets of the series matching any ``match[]`` (``start``/``end`` narrow them; ``limit``)."""
    return await _listing(request, runtime, "/api/v1/series", _series)


@get_and_post(router, "/labels")
async def labels(request: Request, runtime: RuntimeDep) -> Response:
    """Every label name (of the series ``match[]`` selects, when given), sorted (``limit``)."""
    return await _listing(request, runtime, "/api/v1/labels", _label_names)


@router.get("/label/{name}/values")
async def label_values(name: str, request: Request, runtime: RuntimeDep) -> Response:
    """Every value of label ``name`` (``__name__``: metric names), of the series ``match[]``
    selects when given, sorted (``limit``)."""
    return await _listing(request, runtime, f"/api/v1/label/{name}/values", _values_of(name))
