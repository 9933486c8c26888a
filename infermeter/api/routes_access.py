"""Tokens, the audit log and who-am-I over HTTP. Token administration and the audit log need an
admin (see access.policy); a new token's secret is in the answer once and never again."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from access.principal import Role
from access.tokens import TokenError
from infermeter.api.deps import ActorDep, PrincipalDep, RuntimeDep
from infermeter.api.params import parse_time_ms
from store.durations import parse_duration_ms

router = APIRouter(prefix="/api/v1", tags=["access"])


class NewToken(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=255)
    role: str = Field(pattern="^(viewer|operator|admin)$")
    expires_in: str | None = Field(None, description="duration, e.g. 90d (default: never)")


class Rotation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    grace: str | None = Field(None, description="how long the old token stays valid (default security.rotation_grace)")


def _duration(name: str, text: str) -> int:
    try:
        value = parse_duration_ms(text)
    except ValueError as exc:
        raise HTTPException(422, f"{name}: {exc}") from None
    if value <= 0:
        raise HTTPException(422, f"{name} must be positive")
    return value


@router.get("/whoami")
async def whoami(principal: PrincipalDep) -> dict[str, Any]:
    """Who the credentials of this request name, and their role."""
    return {"status": "success", "data": principal.describe()}


@router.get("/tokens")
async def list_tokens(runtime: RuntimeDep) -> dict[str, Any]:
    """Every token, from the config and the database (never a secret or a digest)."""
    records = await run_in_threadpool(runtime.access.tokens.all)
    return {"status": "success", "data": [r.public() for r in records]}


@router.post("/tokens", status_code=201)
async def create_token(body: NewToken, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """A new token: the answer holds its secret, once."""
    access = runtime.access
    expires = runtime.clock.now_ms() + _duration("expires_in", body.expires_in) if body.expires_in else None

    def create() -> tuple[dict[str, object], str]:
        record, secret = access.tokens.create(body.name, Role.named(body.role), who.principal.name, expires)
        access.audit.record(who, "token.create", f"token/{record.id}", None, record.public())
        return record.public(), secret

    try:
        public, secret = await run_in_threadpool(create)
    except TokenError as exc:
        raise HTTPException(422, str(exc)) from None
    return {"status": "success", "data": {**public, "token": secret}}


@router.post("/tokens/{token_id}/rotate", status_code=201,
             responses={404: {"description": "No such token."}, 409: {"description": "Already revoked or expired."}})
async def rotate_token(token_id: int, body: Rotation, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """A new token of the same name and role; the old one stays valid for ``grace``."""
    access = runtime.access
    grace = _duration("grace", body.grace) if body.grace else access.rotation_grace_ms

    def rotate() -> tuple[dict[str, object], dict[str, object], str]:
        old, new, secret = access.tokens.rotate(token_id, who.principal.name, grace)
        access.audit.record(who, "token.rotate", f"token/{token_id}", old.public(), new.public())
        return old.public(), new.public(), secret

    try:
        old, new, secret = await run_in_threadpool(rotate)
    except TokenError as exc:
        raise HTTPException(404 if "no token" in str(exc) else 409, str(exc)) from None
    return {"status": "success", "data": {"old": old, "new": {**new, "token": secret}}}


@router.delete("/tokens/{token_id}", responses={404: {"description": "No such token."}})
async def revoke_token(token_id: int, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """End a token now."""
    access = runtime.access

    def revoke() -> dict[str, object]:
        before = access.tokens.get(token_id).public()
        after = access.tokens.revoke(token_id).public()
        access.audit.record(who, "token.revoke", f"token/{token_id}", before, after)
        return after

    try:
        return {"status": "success", "data": await run_in_threadpool(revoke)}
    except TokenError as exc:
        raise HTTPException(404, str(exc)) from None


@router.get("/audit")
async def audit(runtime: RuntimeDep, since: str | None = None, until: str | None = None, action: str | None = None,
                limit: int = 1000) -> dict[str, Any]:
    """The audit log, newest first: who, when, from where, what, before and after."""
    now = runtime.clock.now_ms()
    since_ms = parse_time_ms("since", since, now) if since else None
    until_ms = parse_time_ms("until", until, now) if until else None
    if not 1 <= limit <= 100_000:
        raise HTTPException(422, "limit must be between 1 and 100000")
    entries = await run_in_threadpool(runtime.access.audit.entries, since_ms, until_ms, action, limit)
    return {"status": "success", "data": entries}
