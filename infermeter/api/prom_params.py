"""Prometheus's HTTP API conventions shared by the query routes: parameters from the query
string and, for POST, the form body; errors in Prometheus's shape."""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.responses import JSONResponse


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
