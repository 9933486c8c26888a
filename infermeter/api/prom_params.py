"""Prometheus's HTTP API conventions shared by the query routes: parameters from the query
string and, for POST, the form body; errors in Prometheus's shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from infermeter.api.params import BadParam, parse_time_ms

Endpoint = Callable[..., Awaitable[Any]]


def get_and_post(router: APIRouter, path: str) -> Callable[[Endpoint], Endpoint]:
    """Register a route for GET and POST under two operation ids (one OpenAPI entry each)."""

    def register(fn: Endpoint) -> Endpoint:
        for method in ("GET", "POST"):
            router.add_api_route(path, fn, methods=[method], operation_id=f"{fn.__name__}_{method.lower()}")
        return fn

    return register


def time_param(params: Params, name: str, now: int, default: int | None) -> int:
    try:
        return parse_time_ms(name, params.get(name), now, default)
    except BadParam as exc:
        raise ApiError("bad_data", f'invalid parameter "{name}": {exc}') from None


class ApiError(Exception):
    """An error answered in Prometheus's shape."""

    STATUS = {"bad_data": 400, "execution": 422, "timeout": 503, "internal": 500}

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)

    def response(self) -> JSONResponse:
        body = {"status": "error", "errorType": self.kind, "error": str(self)}
        return JSONResponse(body, status_code=self.STATUS[self.kind])


class Params:
    """Query parameters and, for POST, the form body (Grafana sends POST by default)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    @classmethod
    async def of(cls, request: Request) -> Params:
        pairs = list(request.query_params.multi_items())
        if request.method == "POST":
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            body = (await request.body()).decode("utf-8", "replace")
            if kind in ("application/x-www-form-urlencoded", "") and body:
                pairs += parse_qsl(body, keep_blank_values=True)
        return cls(pairs)

    def get(self, name: str) -> str | None:
        found = [v for k, v in self.pairs if k == name]
        return found[-1] if found else None

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]

    def has_any(self, names: tuple[str, ...]) -> bool:
        return any(k in names for k, _ in self.pairs)
