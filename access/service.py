"""The access layer built once by the composition root: tokens, who-is-asking, rate limits,
the audit log. Settings are read through callables so a reload's new values hold at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy.engine import Engine

from access.audit import AuditLog
from access.authn import Authenticator
from access.oidc import OidcVerifier
from access.principal import Role
from access.rate import RateLimits
from access.settings import ConfiguredToken, SecuritySettings
from access.tokens import TokenRecord, TokenStore, digest
from store.clock import Clock

LEGACY_TOKEN_NAME = "api_token"


@dataclass
class Access:
    tokens: TokenStore
    auth: Authenticator
    limits: RateLimits
    audit: AuditLog
    rotation_grace_ms: int


@lru_cache(maxsize=8)
def _records(api_token: str | None, tokens: tuple[ConfiguredToken, ...]) -> list[TokenRecord]:
    records = [TokenRecord(0, t.name, Role.named(t.role), t.sha256, 0, "config", None, None) for t in tokens]
    if api_token:
        records.append(TokenRecord(0, LEGACY_TOKEN_NAME, Role.ADMIN, digest(api_token), 0, "config", None, None))
    return records


def build_access(
    engine: Engine,
    clock: Clock,
    security: SecuritySettings,
    api_token: Callable[[], str | None],
    open_reads: Callable[[], bool],
    configured: Callable[[], tuple[ConfiguredToken, ...]] | None = None,
) -> Access:
    """``configured``: the config's named tokens now (default: those of ``security``)."""
    named = configured or (lambda: tuple(security.tokens))
    tokens = TokenStore(engine, clock, lambda: _records(api_token(), named()), refresh_ms=security.token_refresh)
    oidc = OidcVerifier(security.oidc) if security.oidc is not None else None
    auth = Authenticator(tokens, oidc, open_reads)
    return Access(tokens, auth, RateLimits(security.rate_limits), AuditLog(engine, clock), security.rotation_grace)
