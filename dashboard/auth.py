"""The dashboard's gate: an ASGI middleware in front of everything the dashboard serves (pages,
Dash's ``/_dash-*`` routes, component bundles, assets, favicon, reload hash).

It asks the service's authenticator (:mod:`access.authn`) who is asking, as the API does: a
request passes with ``Authorization: Bearer <token or OIDC JWT>`` (what an SSO proxy in front
adds), or with the session cookie that ``/dashboard/?token=<token>`` sets (then redirects to the
same URL without the token, so it stays out of the address bar and the history). The cookie is an
HMAC of the token's digest, never the token. Anonymous visitors pass while reads are open. The
principal travels to Dash in the ``x-infermeter-principal`` header (any such header a client sent
is dropped first), where :func:`signed_in` reads it: the header shows who is signed in, and
admin-only controls check the role.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from access.authn import SESSION_COOKIE, PrincipalSource, Refused, maybe_in_thread
from access.principal import Principal, Role

PRINCIPAL_HEADER = "x-infermeter-principal"


Authenticates = PrincipalSource  # the dashboard's name for what it asks


def _refusal(request: Request, prefix: str, reason: str) -> Response:
    text = (f"{reason}. The dashboard needs a token: open {prefix}/?token=<token> once (a session cookie keeps you "
            "signed in), or send Authorization: Bearer <token>.")
    headers = {"WWW-Authenticate": "Bearer"}
    if "application/json" in request.headers.get("accept", "") or request.method != "GET":
        return JSONResponse({"status": "error", "errorType": "unauthorized", "error": text}, status_code=401,
                            headers=headers)
    return PlainTextResponse(text, status_code=401, headers=headers)


def encode_principal(principal: Principal) -> bytes:
    return f"{quote(principal.name, safe='')};{principal.role.label};{principal.via}".encode("ascii")


def decode_principal(value: str | None) -> Principal | None:
    if not value:
        return None
    try:
        name, role, via = value.split(";")
        return Principal(unquote(name), Role.named(role), via)
    except ValueError:
        return None


def signed_in() -> Principal | None:
    """Inside a Dash callback or page: who is asking (None outside a request)."""
    import flask

    if not flask.has_request_context():
        return None
    return decode_principal(flask.request.headers.get(PRINCIPAL_HEADER))


class TokenGate:
    def __init__(self, app: ASGIApp, auth: Authenticates, prefix: str = "/dashboard") -> None:
        self.app = app
        self.auth = auth
        self.prefix = prefix.rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # Dash serves none; nothing passes the gate unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        offered = request.query_params.get("token")
        if offered is not None:
            response = await self._sign_in(request, offered)
            await response(scope, receive, send)
            return
        try:
            principal = await maybe_in_thread(self.auth, request.headers.get("authorization"),
                                              request.cookies.get(SESSION_COOKIE))
        except Refused as exc:
            await _refusal(request, self.prefix, str(exc))(scope, receive, send)
            return
        if principal is None:
            await _refusal(request, self.prefix, "Reads need a token here")(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != PRINCIPAL_HEADER.encode()]
        headers.append((PRINCIPAL_HEADER.encode(), encode_principal(principal)))
        await self.app({**scope, "headers": headers}, receive, send)

    async def _sign_in(self, request: Request, offered: str) -> Response:
        session = await run_in_threadpool(self.auth.session_for, offered)
        if session is None:
            return _refusal(request, self.prefix, "The token is not valid (unknown, revoked or expired)")
        url: URL = request.url.remove_query_params("token")
        response = RedirectResponse(url.path + (f"?{url.query}" if url.query else ""), status_code=303)
        response.set_cookie(SESSION_COOKIE, session, path=self.prefix or "/", httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response


__all__ = ["TokenGate", "PRINCIPAL_HEADER", "signed_in", "encode_principal", "decode_principal"]
