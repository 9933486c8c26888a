"""OIDC / JWT bearer tokens from an organisation's identity provider.

A bearer that looks like a JWT is verified against the issuer's signing keys (JWKS, fetched from
``jwks_url`` or found through the issuer's ``/.well-known/openid-configuration``, cached and
refetched when a token names an unknown key): signature (asymmetric algorithms only), ``iss``,
``aud``, ``exp``/``nbf`` with a small leeway. The role comes from a claim (a string or a list,
e.g. groups) mapped through ``roles``; the highest mapped role wins; a valid token with no mapped
role is refused (403), not let in as a viewer.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    import jwt

from access.principal import Principal, Role
from access.settings import OidcSettings

_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


class OidcRefused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def looks_like_jwt(secret: str) -> bool:
    return secret.count(".") == 2 and secret.startswith("eyJ")


class OidcVerifier:
    def __init__(self, settings: OidcSettings, timeout_s: float = 5.0) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self._roles = {claim: Role.named(role) for claim, role in settings.roles.items()}
        self._client: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def _keys(self) -> jwt.PyJWKClient:
        import jwt  # with its cryptography, ~17 MiB: loaded by the first OIDC token, not by every service

        with self._lock:
            if self._client is None:
                url = self.settings.jwks_url or self._discover()
                self._client = jwt.PyJWKClient(url, cache_keys=True, lifespan=3600, timeout=int(self.timeout_s))
            return self._client

    def _discover(self) -> str:
        url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            response = httpx.get(url, timeout=self.timeout_s)
            response.raise_for_status()
            return str(response.json()["jwks_uri"])
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise OidcRefused(503, f"cannot read the issuer's discovery document {url}: {exc}") from None

    def verify(self, token: str) -> Principal:
        import jwt

        try:
            key = self._keys().get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=_ALGORITHMS, audience=self.settings.audience, issuer=self.settings.issuer,
                leeway=self.settings.leeway_s, options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWKClientConnectionError as exc:
            raise OidcRefused(503, f"cannot fetch the issuer's signing keys: {exc}") from None
        except jwt.PyJWTError as exc:
            raise OidcRefused(401, f"the bearer JWT is not valid: {exc}") from None
        return Principal(self._name(claims), self._role(claims), "oidc")

    def _name(self, claims: dict[str, Any]) -> str:
        name = claims.get(self.settings.name_claim) or claims.get("sub") or "unknown"
        return str(name)[:255]

    def _role(self, claims: dict[str, Any]) -> Role:
        value = claims.get(self.settings.role_claim)
        values = value if isinstance(value, list) else [value] if value is not None else []
        mapped = [self._roles[v] for v in values if isinstance(v, str) and v in self._roles]
        if not mapped:
            raise OidcRefused(403, f"the token's {self.settings.role_claim!r} claim maps to no infermeter role")
        return max(mapped)
