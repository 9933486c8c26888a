"""Who is asking: one place turns a request's credentials into a :class:`Principal`.

A bearer is tried as an OIDC JWT (when an issuer is configured and it looks like one), then as
an API token. Without a bearer, the dashboard's session cookie (an HMAC of a token's digest,
never the token) is tried. No credentials give the anonymous reader while reads are open, or
nobody; with nothing configured at all the service is open (everyone is an admin)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Protocol

from starlette.concurrency import run_in_threadpool

from access.oidc import OidcRefused, OidcVerifier, looks_like_jwt
from access.principal import ANONYMOUS_READER, OPEN_ADMIN, Principal
from access.tokens import TokenRecord, TokenStore

SESSION_COOKIE = "infermeter_session"
_SESSION_CONTEXT = b"infermeter-dashboard-session-v2"


class Refused(Exception):
    """Credentials were offered and are not good: 401 (unknown), 403 (no role), 503 (issuer down)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def session_value(record: TokenRecord) -> str:
    return hmac.new(bytes.fromhex(record.sha256), _SESSION_CONTEXT, hashlib.sha256).hexdigest()


class Authenticator:
    def __init__(self, tokens: TokenStore, oidc: OidcVerifier | None, open_reads: Callable[[], bool]) -> None:
        self.tokens = tokens
        self.oidc = oidc
        self.open_reads = open_reads

    def may_block(self, authorization: str | None) -> bool:
        """Whether :meth:`principal` may wait on I/O (the token table's periodic re-read, an
        issuer's keys): then callers on an event loop run it on a thread, else inline, so that
        no request queues for a thread just to be authorised."""
        offered = bearer(authorization or "")
        return self.tokens.stale() or (self.oidc is not None and offered is not None and looks_like_jwt(offered))

    def enabled(self) -> bool:
        return self.oidc is not None or self.tokens.any_configured()

    def principal(self, authorization: str | None, session: str | None = None) -> Principal | None:
        """The principal of these credentials; None: no credentials and reads are closed."""
        offered = bearer(authorization or "")
        if offered is not None:
            return self._from_bearer(offered)
        if session and session != "open":
            record = self.session_record(session)
            if record is None:
                raise Refused(401, "the dashboard session is no longer valid (its token was revoked or expired)")
            return Principal(record.name, record.role, "token")
        if not self.enabled():
            return OPEN_ADMIN
        return ANONYMOUS_READER if self.open_reads() else None

    def _from_bearer(self, offered: str) -> Principal:
        if self.oidc is not None and looks_like_jwt(offered):
            try:
                return self.oidc.verify(offered)
            except OidcRefused as exc:
                raise Refused(exc.status, str(exc)) from None
        record = self.tokens.find(offered)
        if record is not None:
            return Principal(record.name, record.role, "token")
        if not self.enabled():
            return OPEN_ADMIN  # a bearer sent to an open service is not an error
        raise Refused(401, "the bearer token is not valid (unknown, revoked or expired)")

    def session_for(self, secret: str) -> str | None:
        """The dashboard's session cookie for a valid token (None: not valid). With nothing
        configured any value signs in to the open service."""
        record = self.tokens.find(secret)
        if record is not None:
            return session_value(record)
        return None if self.enabled() else "open"

    def session_record(self, value: str) -> TokenRecord | None:
        now = self.tokens.clock.now_ms()
        for record in self.tokens.list_cached():
            if record.valid_at(now) and hmac.compare_digest(session_value(record), value):
                return record
        return None


class PrincipalSource(Protocol):
    """What the API's and the dashboard's gates ask (an :class:`Authenticator`)."""

    def principal(self, authorization: str | None, session: str | None = None) -> Principal | None: ...

    def may_block(self, authorization: str | None) -> bool: ...

    def session_for(self, secret: str) -> str | None: ...


async def maybe_in_thread(auth: PrincipalSource, authorization: str | None, session: str | None) -> Principal | None:
    """:meth:`Authenticator.principal` from an event loop: on a thread only when it may block."""
    if auth.may_block(authorization):
        return await run_in_threadpool(auth.principal, authorization, session)
    return auth.principal(authorization, session)
