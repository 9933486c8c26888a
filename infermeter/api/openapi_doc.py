"""The OpenAPI document as the service really answers, and 405s that name the allowed methods.

FastAPI documents what it sees in the signatures. The Prometheus-style routes read their
parameters from the query string or the form body themselves (Grafana sends either), and every
route can answer the authorization dependency's 401/403/429, a bad parameter's 400 and an
unavailable part's 503; those are added here, once, with one error schema (Prometheus's shape,
or FastAPI's ``detail``). Text answers (``/metrics``, federation) are declared as text.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

_STRING = {"type": "string"}
_MATCH = {"name": "match[]", "in": "query", "schema": {"type": "array", "items": _STRING},
          "style": "form", "explode": True, "description": "series selectors, e.g. up{job=\"vllm\"}"}
_TIME = "Unix seconds, RFC 3339, or now-<duration>"


def _param(name: str, description: str, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": _STRING, "description": description}


_QUERY = _param("query", "a PromQL expression", True)
_PROM_PARAMS: dict[str, list[dict[str, Any]]] = {
    "/api/v1/query": [_QUERY, _param("time", _TIME), _param("timeout", "a duration, at most query.timeout")],
    "/api/v1/query_range": [
        _QUERY, _param("start", _TIME, True), _param("end", _TIME, True),
        _param("step", "a duration (15s) or seconds", True), _param("timeout", "a duration"),
        _param("fn", "infermeter's stepped fold instead of PromQL: last, avg, min, max, sum, count, rate, increase"),
        _param("by", "with fn: labels to aggregate by"), _param("agg", "with fn: sum, avg, min, max, count"),
        _param("quantile", "with fn: a quantile of a histogram"),
    ],
    "/api/v1/series": [{**_MATCH, "required": True}, _param("start", _TIME), _param("end", _TIME),
                       _param("limit", "at most this many series (0: all)")],
    "/api/v1/labels": [_MATCH, _param("start", _TIME), _param("end", _TIME), _param("limit", "at most this many")],
    "/api/v1/label/{name}/values": [_MATCH, _param("start", _TIME), _param("end", _TIME),
                                    _param("limit", "at most this many")],
    "/api/v1/query_exemplars": [_QUERY, _param("start", _TIME), _param("end", _TIME)],
    "/api/v1/format_query": [_QUERY],
}
_TEXT = {"/metrics": "text/plain; version=0.0.4", "/api/v1/federate": "text/plain; version=0.0.4"}
_ERRORS = {
    "400": "A bad parameter, expression or body; the error names it.",
    "401": "No valid credentials (a bearer token or OIDC JWT is needed).",
    "403": "The credentials' role is below the one this route needs.",
    "422": "A body or parameter that does not validate; the error names the field.",
    "429": "Over the principal's rate limit; Retry-After says when to retry.",
    "503": "A part is unavailable (query timeout, issuer unreachable, follower of an HA pair).",
}
_ERROR_SCHEMA = {
    "title": "Error", "type": "object", "additionalProperties": True,
    "properties": {"status": _STRING, "errorType": _STRING, "error": _STRING, "detail": {}},
}


def _form_body(params: list[dict[str, Any]]) -> dict[str, Any]:
    properties = {p["name"]: p["schema"] for p in params}
    required = [p["name"] for p in params if p.get("required")]
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"content": {"application/x-www-form-urlencoded": {"schema": schema}}, "required": bool(required)}


def _complete(doc: dict[str, Any]) -> dict[str, Any]:
    doc.setdefault("components", {}).setdefault("schemas", {})["Error"] = _ERROR_SCHEMA
    error_ref = {"$ref": "#/components/schemas/Error"}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for code, text in _ERRORS.items():
                if code == "422" and code in responses:  # FastAPI's validation error, or ours with a text detail
                    content = responses[code].setdefault("content", {}).setdefault("application/json", {})
                    known = content.get("schema")
                    content["schema"] = {"anyOf": [known, error_ref]} if known else error_ref
                    continue
                responses.setdefault(code, {"description": text, "content": {"application/json": {"schema": error_ref}}})
            if "{" in path:
                responses.setdefault("404", {"description": "Nothing with that id.",
                                             "content": {"application/json": {"schema": error_ref}}})
            if path in _PROM_PARAMS:
                params = _PROM_PARAMS[path]
                if method == "get":
                    path_params = [p for p in operation.get("parameters", []) if p.get("in") == "path"]
                    operation["parameters"] = path_params + params
                elif method == "post":
                    operation["requestBody"] = _form_body(params)
            if path in _TEXT and method == "get":
                responses["200"] = {"description": "Prometheus text exposition",
                                    "content": {_TEXT[path]: {"schema": _STRING}}}
    return doc


def document(app: FastAPI) -> None:
    """Install the completed OpenAPI document and the 405 handler on ``app``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            app.openapi_schema = _complete(doc)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    allowed: list[tuple[re.Pattern[str], list[str]]] = []

    async def method_not_allowed(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if not allowed:
            for path, operations in openapi()["paths"].items():
                pattern = re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", path) + "$")  # paths hold no regex specials
                allowed.append((pattern, sorted(m.upper() for m in operations)))
        methods = next((m for pattern, m in allowed if pattern.match(request.url.path)), [])
        return JSONResponse({"status": "error", "errorType": "method_not_allowed",
                             "error": f"{request.method} is not allowed on {request.url.path}; use {', '.join(methods)}"},
                            status_code=405, headers={"Allow": ", ".join(methods)})

    app.add_exception_handler(405, method_not_allowed)  # type: ignore[arg-type]
