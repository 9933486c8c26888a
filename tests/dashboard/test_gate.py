"""The dashboard's gate as an ASGI app, without a server, over the real authenticator and token
store (SQLite): what passes, what is refused, and the principal handed on to Dash."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from access.authn import SESSION_COOKIE, Authenticator
from access.principal import Role
from access.tokens import TokenStore
from dashboard.auth import PRINCIPAL_HEADER, TokenGate, decode_principal
from infermeter import db
from store.clock import ManualClock
from store.engine import create_store_engine


class Recorder:
    def __init__(self) -> None:
        self.calls = 0
        self.principal: str | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        self.principal = dict(scope["headers"]).get(PRINCIPAL_HEADER.encode(), b"").decode() or None
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


@pytest.fixture
def tokens(tmp_path: Path) -> TokenStore:
    engine = create_store_engine(f"sqlite:///{tmp_path / 'gate.db'}")
    db.upgrade(engine)
    return TokenStore(engine, ManualClock(1_000_000), lambda: [], refresh_ms=0)


def test_nothing_configured_means_open(tokens: TokenStore) -> None:
    app = Recorder()
    assert run(TokenGate(app, Authenticator(tokens, None, lambda: False)))[0]["status"] == 200 and app.calls == 1
    principal = decode_principal(app.principal)
    assert principal is not None and principal.via == "open"


def test_tokens_gate_http_and_websockets_and_name_the_principal(tokens: TokenStore) -> None:
    app = Recorder()
    _, secret = tokens.create("alice", Role.VIEWER, "test")
    gate = TokenGate(app, Authenticator(tokens, None, lambda: False))
    assert run(gate)[0]["status"] == 401
    forged = [(PRINCIPAL_HEADER.encode(), b"mallory;admin;token")]
    assert run(gate, headers=forged)[0]["status"] == 401  # a header of its own opens nothing
    assert run(gate, headers=[(b"authorization", f"Bearer {secret}".encode()), *forged])[0]["status"] == 200
    assert app.principal == "alice;viewer;token"  # the forged header was dropped
    signed_in = run(gate, query=f"token={secret}".encode())
    assert signed_in[0]["status"] == 303
    cookie = next(v for k, v in signed_in[0]["headers"] if k == b"set-cookie").decode().split(";")[0]
    assert secret not in cookie
    assert run(gate, headers=[(b"cookie", cookie.encode())])[0]["status"] == 200
    assert run(gate, headers=[(b"cookie", f"{SESSION_COOKIE}={secret}".encode())])[0]["status"] == 401
    assert run(gate, "websocket") == [{"type": "websocket.close", "code": 1008}]
    assert app.calls == 2


def test_open_reads_let_anonymous_viewers_in_and_revocation_holds_at_once(tokens: TokenStore) -> None:
    app = Recorder()
    record, secret = tokens.create("bob", Role.ADMIN, "test")
    gate = TokenGate(app, Authenticator(tokens, None, lambda: True))
    assert run(gate)[0]["status"] == 200 and app.principal == "anonymous;viewer;anonymous"
    assert run(gate, headers=[(b"authorization", f"Bearer {secret}".encode())])[0]["status"] == 200
    tokens.revoke(record.id)
    assert run(gate, headers=[(b"authorization", f"Bearer {secret}".encode())])[0]["status"] == 401
