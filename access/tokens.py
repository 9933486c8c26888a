"""API tokens: random secrets handed out once, kept only as SHA-256 digests.

A token is 32 random bytes (``imt_`` + URL-safe base64). A fast digest is enough for secrets of
that entropy (no dictionary to guess from, unlike passwords), and it lets a request be matched
by one indexed lookup. Several tokens may share a name (rotation: create the new one, move the
clients, revoke or let expire the old one); every process re-reads the table every few
seconds, so a token created or revoked through one process of an HA pair holds on the other
without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from access.principal import Role
from access.schema import api_tokens
from store.clock import Clock

PREFIX = "imt_"


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: int  # 0 for tokens from the config file
    name: str
    role: Role
    sha256: str
    created_ms: int
    created_by: str
    expires_ms: int | None
    revoked_ms: int | None

    def valid_at(self, now_ms: int) -> bool:
        return self.revoked_ms is None and (self.expires_ms is None or now_ms < self.expires_ms)

    def public(self) -> dict[str, object]:
        """What the API lists: never the digest."""
        return {"id": self.id, "name": self.name, "role": self.role.label, "created_ms": self.created_ms,
                "created_by": self.created_by, "expires_ms": self.expires_ms, "revoked_ms": self.revoked_ms,
                "source": "config" if self.id == 0 else "database"}


class TokenError(ValueError):
    pass


class TokenStore:
    def __init__(self, engine: Engine, clock: Clock, configured: Callable[[], list[TokenRecord]],
                 refresh_ms: int = 5000) -> None:
        """``configured``: the config file's tokens, asked each time (a reload may change them)."""
        self.engine = engine
        self.clock = clock
        self.configured = configured
        self.refresh_ms = refresh_ms
        self._lock = threading.Lock()
        self._by_digest: dict[str, TokenRecord] = {}
        self._loaded_ms: int | None = None

    # -- lookups (every request) -----------------------------------------------------------
    def any_configured(self) -> bool:
        """True once any token exists (config or database): then credentials are checked."""
        return bool(self.configured()) or bool(self._table())

    def find(self, secret: str) -> TokenRecord | None:
        wanted = digest(secret)
        now = self.clock.now_ms()
        for record in self.configured():  # constant-time: the config's digests are few
            if hmac.compare_digest(record.sha256, wanted) and record.valid_at(now):
                return record
        stored = self._table().get(wanted)
        return stored if stored is not None and stored.valid_at(now) else None

    def stale(self) -> bool:
        """Whether the next lookup reads the database (the copy is older than ``refresh_ms``)."""
        now, loaded = self.clock.now_ms(), self._loaded_ms
        return loaded is None or now - loaded >= self.refresh_ms or now < loaded

    def _table(self) -> dict[str, TokenRecord]:
        with self._lock:
            if self.stale():
                self._by_digest = {r.sha256: r for r in self._read_all()}
                self._loaded_ms = self.clock.now_ms()
            return self._by_digest

    def _invalidate(self) -> None:
        with self._lock:
            self._loaded_ms = None

    def _read_all(self) -> list[TokenRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(api_tokens).order_by(api_tokens.c.id)).mappings().all()
        return [TokenRecord(r["id"], r["name"], Role.named(r["role"]), r["sha256"], r["created_ms"], r["created_by"],
                            r["expires_ms"], r["revoked_ms"]) for r in rows]

    # -- administration ----------------------------------------------------------------------
    def all(self) -> list[TokenRecord]:
        return [*self.configured(), *self._read_all()]

    def list_cached(self) -> list[TokenRecord]:
        """As :meth:`all`, from the copy re-read every ``refresh_ms`` (for per-request checks)."""
        return [*self.configured(), *self._table().values()]

    def create(self, name: str, role: Role, actor: str, expires_ms: int | None = None) -> tuple[TokenRecord, str]:
        """A new token; the secret is returned once and never stored."""
        name = name.strip()
        if not name or len(name) > 255:
            raise TokenError("a token needs a name of 1 to 255 characters")
        now = self.clock.now_ms()
        if expires_ms is not None and expires_ms <= now:
            raise TokenError("expires must lie in the future")
        secret = new_secret()
        hashed = digest(secret)
        row = {"name": name, "role": role.label, "sha256": hashed, "created_ms": now, "created_by": actor,
               "expires_ms": expires_ms, "revoked_ms": None}
        with self.engine.begin() as conn:
            token_id = conn.execute(sa.insert(api_tokens).values(**row).returning(api_tokens.c.id)).scalar_one()
        self._invalidate()
        return TokenRecord(token_id, name, role, hashed, now, actor, expires_ms, None), secret

    def get(self, token_id: int) -> TokenRecord:
        for record in self._read_all():
            if record.id == token_id:
                return record
        raise TokenError(f"no token with id {token_id} in the database (config-file tokens change in the file)")

    def revoke(self, token_id: int, at_ms: int | None = None) -> TokenRecord:
        """Ends a token at ``at_ms`` (default now: at once); a later time is a rotation's grace."""
        self.get(token_id)  # raises for an unknown id
        now = self.clock.now_ms()
        ends = now if at_ms is None else max(now, at_ms)
        with self.engine.begin() as conn:
            if ends == now:
                conn.execute(sa.update(api_tokens).where(api_tokens.c.id == token_id).values(revoked_ms=now))
            else:
                conn.execute(sa.update(api_tokens).where(api_tokens.c.id == token_id).values(expires_ms=ends))
        self._invalidate()
        return self.get(token_id)

    def rotate(self, token_id: int, actor: str, grace_ms: int) -> tuple[TokenRecord, TokenRecord, str]:
        """A new token of the same name and role; the old one stays valid ``grace_ms`` more.
        Returns (old as it now is, new, new secret)."""
        old = self.get(token_id)
        if not old.valid_at(self.clock.now_ms()):
            raise TokenError(f"token {token_id} is already revoked or expired")
        new, secret = self.create(old.name, old.role, actor)
        return self.revoke(token_id, self.clock.now_ms() + grace_ms), new, secret
