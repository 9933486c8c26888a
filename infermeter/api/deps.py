"""Typed dependencies: routes ask for the runtime and the principal, never import a global.

:func:`authorize` is the one authorization dependency: the app installs it on every route, and
the role a route needs comes from :mod:`access.policy`'s table, so no route can forget it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from access.audit import Actor
from access.authn import SESSION_COOKIE, Refused, maybe_in_thread
from access.policy import rate_class, required_role
from access.principal import ANONYMOUS_READER, Principal
from infermeter.runtime import Runtime


class AccessDenied(Exception):
    """Answered in Prometheus's error shape with ``status`` (401, 403, 429, 503)."""

    def __init__(self, status: int, error_type: str, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.error_type = error_type
        self.headers = headers or {}


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def _route_path(request: Request) -> str:
    route = request.scope.get("route")
    return str(getattr(route, "path", request.url.path))


def address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def authorize(request: Request, runtime: RuntimeDep) -> Principal:
    """Who is asking, checked against the role the route needs and the principal's rate limit."""
    method, path = request.method, _route_path(request)
    needed = required_role(method, path)
    if needed is None:  # probes answer at once, whatever credentials come with them
        return ANONYMOUS_READER
    access = runtime.access
    try:
        principal = await maybe_in_thread(access.auth, request.headers.get("authorization"),
                                          request.cookies.get(SESSION_COOKIE))
    except Refused as exc:
        kind = {401: "unauthorized", 403: "forbidden"}.get(exc.status, "unavailable")
        raise AccessDenied(exc.status, kind, str(exc),
                           {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None) from None
    if principal is None or (principal.via == "anonymous" and not principal.may(needed)):
        raise AccessDenied(401, "unauthorized", f"{method} {path} needs a bearer token (role {needed.label} or above)",
                           {"WWW-Authenticate": "Bearer"})
    if not principal.may(needed):
        raise AccessDenied(403, "forbidden", f"{method} {path} needs role {needed.label}; {principal.name} holds "
                           f"{principal.role.label}")
    key = principal.name if principal.via in ("token", "oidc") else f"{principal.name}@{address(request)}"
    over = access.limits.over(rate_class(method, path), key)
    if over is not None:
        limit, retry_s = over
        raise AccessDenied(429, "too_many_requests", f"rate limit {limit} of {key} exceeded on {path}; retry in "
                           f"{retry_s} s", {"Retry-After": str(retry_s)})
    request.state.principal = principal
    return principal


PrincipalDep = Annotated[Principal, Depends(authorize)]


def actor(request: Request, principal: PrincipalDep) -> Actor:
    """The principal and its address, for the audit log."""
    return Actor(principal, address(request))


ActorDep = Annotated[Actor, Depends(actor)]


class AuditedEditor:
    """A change's author (the authenticated identity, None when anonymous) and its audit record."""

    def __init__(self, who: Actor, runtime: Runtime) -> None:
        self.actor = who
        self.name = who.principal.name if who.principal.via in ("token", "oidc") else None
        self._audit = runtime.access.audit

    def record(self, action: str, target: str, before: object, after: object) -> None:
        self._audit.record(self.actor, action, target, before, after)


def editor(who: ActorDep, runtime: RuntimeDep) -> AuditedEditor:
    return AuditedEditor(who, runtime)


EditorDep = Annotated[AuditedEditor, Depends(editor)]
