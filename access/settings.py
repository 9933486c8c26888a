"""The ``security:`` section: named tokens from the config (digests only), an OIDC issuer, rate
limits per principal. ``server.api_token`` (INFERMETER_API_TOKEN) stays: an admin token named
``api_token``."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from access.principal import ROLE_NAMES
from store.durations import DurationMs


class Strict(BaseModel):
    """Settings models here: unknown keys are errors, values do not change once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfiguredToken(Strict):
    name: str = Field(min_length=1, max_length=255, description="who the token belongs to (shown in the audit log)")
    role: str = Field(description="viewer, operator or admin")
    sha256: str = Field(description="hex SHA-256 of the token: `infermeter tokens hash` prints it; never the token")

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        if value not in ROLE_NAMES:
            raise ValueError(f"role must be one of {', '.join(ROLE_NAMES)}")
        return value

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{64}", value.lower()):
            raise ValueError("sha256 must be 64 hex digits (the digest, not the token)")
        return value.lower()


def _rate(value: str | None) -> str | None:
    if value is None:
        return None
    from limits import parse_many  # not at import: the agent reads these settings and never limits

    try:
        parse_many(value)
    except ValueError as exc:
        raise ValueError(f"not a rate limit like '100/second' or '10/second;500/minute': {exc}") from None
    return value



class OidcSettings(Strict):
    issuer: str = Field(description="the issuer URL, exactly as in the tokens' iss claim")
    audience: str = Field(description="the aud claim the tokens must carry (the client id given to infermeter)")
    jwks_url: str | None = Field(None, description="the signing keys; default: found from the issuer's discovery document")
    role_claim: str = Field("roles", description="the claim holding the role or groups (string or list)")
    roles: dict[str, str] = Field(
        default_factory=dict,
        description="claim value -> viewer/operator/admin, e.g. {'infermeter-admins': 'admin'}",
    )
    name_claim: str = Field("preferred_username", description="the claim shown as who is signed in (falls back to sub)")
    leeway_s: int = Field(30, ge=0, le=600, description="clock skew allowed on exp and nbf")


class RateLimitSettings(Strict):
    query: str | None = Field(
        None, description="per principal on query, series, label and federate routes, e.g. '50/second' (off when unset)"
    )
    write: str | None = Field(
        None, description="per principal on ingest and every change (silences, prices, tokens), e.g. '200/second'"
    )

    _query_rate = field_validator("query")(classmethod(lambda cls, v: _rate(v)))
    _write_rate = field_validator("write")(classmethod(lambda cls, v: _rate(v)))


class SecuritySettings(Strict):
    """Authentication and authorization: once any token (here, INFERMETER_API_TOKEN, or created with
    `infermeter tokens create`) or an OIDC issuer exists, every route but /health and /ready needs a
    credential, except reads while server.open_reads is true."""

    tokens: list[ConfiguredToken] = Field(default_factory=list, description="named tokens and their roles")
    oidc: OidcSettings | None = Field(None, description="verify bearer JWTs from this issuer (single sign-on)")
    rate_limits: RateLimitSettings = Field(RateLimitSettings(), description="requests per principal (429 over it)")
    token_refresh: DurationMs = Field(
        5000, description="how often tokens created or revoked elsewhere (the other process of a pair) are re-read"
    )
    rotation_grace: DurationMs = Field(
        86_400_000, description="how long the old token of a rotation stays valid by default"
    )
