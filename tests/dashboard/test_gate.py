"""The token gate as an ASGI app, without a server: what passes, what is refused."""

from __future__ import annotations

import asyncio
from typing import Any

from dashboard.auth import COOKIE, TokenGate, cookie_value


class Recorder:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def run(gate: TokenGate, scope_type: str = "http", headers: list[tuple[bytes, bytes]] | None = None,
        query: bytes = b"") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    scope = {"type": scope_type, "method": "GET", "path": "/dashboard/_dash-layout", "root_path": "/dashboard",
             "query_string": query, "headers": headers or [], "scheme": "http", "server": ("127.0.0.1", 80)}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    return sent


def test_no_token_configured_means_open() -> None:
    app = Recorder()
    assert run(TokenGate(app, lambda: None))[0]["status"] == 200 and app.calls == 1


def test_token_configured_gates_http_and_websockets() -> None:
    app = Recorder()
    gate = TokenGate(app, lambda: "tok")
    assert run(gate)[0]["status"] == 401
    assert run(gate, headers=[(b"authorization", b"Bearer tok")])[0]["status"] == 200
    assert run(gate, headers=[(b"cookie", f"{COOKIE}={cookie_value('tok')}".encode())])[0]["status"] == 200
    assert run(gate, headers=[(b"cookie", f"{COOKIE}=tok".encode())])[0]["status"] == 401  # the raw token is no cookie
    assert run(gate, "websocket") == [{"type": "websocket.close", "code": 1008}]
    assert app.calls == 2


def test_the_token_is_read_per_request() -> None:
    token: list[str | None] = [None]
    gate = TokenGate(Recorder(), lambda: token[0])
    assert run(gate)[0]["status"] == 200
    token[0] = "new"
    assert run(gate)[0]["status"] == 401
