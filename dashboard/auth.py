"""The dashboard's token gate: an ASGI middleware in front of everything the dashboard serves
(pages, Dash's ``/_dash-*`` routes, component bundles, assets, favicon, reload hash).

When ``server.api_token`` is set, a request passes with ``Authorization: Bearer <token>``, or
with the session cookie that ``/dashboard/?token=<token>`` sets (then redirects to the same
URL without the token, so it does not stay in the address bar or the history). The cookie
holds an HMAC of the token, not the token (which also authorises writes to the API); both
comparisons are constant-time. Without a token configured the gate is open, like the API's
reads. The token is read per request, so a runtime that changes it is honoured at once.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "infermeter_dashboard"
_CONTEXT = b"infermeter-dashboard-session-v1"


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), _CONTEXT, hashlib.sha256).hexdigest()


def same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def authorised(request: Request, token: str) -> bool:
    given = bearer(request.headers.get("authorization", ""))
    if given is not None and same(given, token):
        return True
    cookie = request.cookies.get(COOKIE)
    return cookie is not None and same(cookie, cookie_value(token))


def _refusal(request: Request, prefix: str) -> Response:
    text = (f"The dashboard needs the API token: open {prefix}/?token=<token> once (a session cookie keeps you "
            "signed in), or send Authorization: Bearer <token>.")
    headers = {"WWW-Authenticate": "Bearer"}
    if "application/json" in request.headers.get("accept", "") or request.method != "GET":
        return JSONResponse({"status": "error", "error": text}, status_code=401, headers=headers)
    return PlainTextResponse(text, status_code=401, headers=headers)


class TokenGate:
    def __init__(self, app: ASGIApp, token: Callable[[], str | None], prefix: str = "/dashboard") -> None:
        self.app = app
        self.token = token
        self.prefix = prefix.rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = self.token() if scope["type"] in ("http", "websocket") else None
        if not token:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # Dash serves none; nothing passes the gate unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        request = Request(scope)
        offered = request.query_params.get("token")
        if offered is not None:
            if not same(offered, token):
                await _refusal(request, self.prefix)(scope, receive, send)
                return
            url: URL = request.url.remove_query_params("token")
            target = url.path + (f"?{url.query}" if url.query else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, cookie_value(token), path=self.prefix or "/", httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
            await response(scope, receive, send)
            return
        if not authorised(request, token):
            await _refusal(request, self.prefix)(scope, receive, send)
            return
        await self.app(scope, receive, send)


__all__ = ["TokenGate", "COOKIE", "cookie_value", "authorised", "bearer"]
