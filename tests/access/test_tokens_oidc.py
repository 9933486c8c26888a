"""Tokens (hashed, rotated, revoked without restart, seen by a second process on the same
database) and OIDC bearer JWTs verified against a JWKS served on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric import rsa

from access.authn import Authenticator, Refused
from access.oidc import OidcVerifier
from access.principal import Role
from access.schema import api_tokens
from access.settings import OidcSettings
from access.tokens import TokenStore, digest
from infermeter import db
from infermeter.settings import GpuSettings, ServerSettings, Settings, StoreSettings
from store.clock import ManualClock
from store.engine import create_store_engine
from tests.service import serve

T0 = 1_764_000_000_000


def _store(url: str, clock: ManualClock, refresh_ms: int = 5000) -> TokenStore:
    engine = create_store_engine(url)
    db.upgrade(engine)
    return TokenStore(engine, clock, lambda: [], refresh_ms=refresh_ms)


def test_tokens_are_stored_as_digests_and_rotation_keeps_both_valid(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tokens = _store(f"sqlite:///{tmp_path / 't.db'}", clock, refresh_ms=0)
    record, secret = tokens.create("ci", Role.OPERATOR, "admin")
    with tokens.engine.connect() as conn:
        stored = [dict(r) for r in conn.execute(sa.select(api_tokens)).mappings()]
    assert stored[0]["sha256"] == digest(secret) and secret not in json.dumps(stored)
    old, new, new_secret = tokens.rotate(record.id, "admin", grace_ms=3_600_000)
    assert new.name == "ci" and new.role is Role.OPERATOR and old.expires_ms == T0 + 3_600_000
    assert tokens.find(secret) is not None and tokens.find(new_secret) is not None  # both during the grace
    clock.advance(3_600_000)
    assert tokens.find(secret) is None and tokens.find(new_secret) is not None
    tokens.revoke(new.id)
    assert tokens.find(new_secret) is None


def test_a_second_process_sees_creation_and_revocation_within_the_refresh(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pair.db'}"
    clock = ManualClock(T0)
    a, b = _store(url, clock), _store(url, clock)
    auth_b = Authenticator(b, None, lambda: False)
    assert auth_b.principal(None) is not None and auth_b.principal(None).via == "open"  # type: ignore[union-attr]
    record, secret = a.create("ops", Role.ADMIN, "test")
    assert not auth_b.may_block(f"Bearer {secret}")  # b's copy is fresh: no database read, inline
    clock.advance(5000)
    assert auth_b.may_block(f"Bearer {secret}")  # due for a re-read: run on a thread
    principal = auth_b.principal(f"Bearer {secret}")
    assert not auth_b.may_block(None)
    assert principal is not None and principal.name == "ops" and principal.role is Role.ADMIN
    assert auth_b.principal(None) is None  # tokens exist now: anonymous reads are closed
    a.revoke(record.id)
    assert auth_b.principal(f"Bearer {secret}") is not None  # b's copy is at most refresh_ms old
    clock.advance(5000)
    with pytest.raises(Refused) as refused:
        auth_b.principal(f"Bearer {secret}")
    assert refused.value.status == 401


def test_tokens_api_creates_rotates_revokes_and_audits(tmp_path: Path) -> None:
    settings = Settings(server=ServerSettings(api_token="root-secret"),
                        store=StoreSettings(url=f"sqlite:///{tmp_path / 'api.db'}"), gpu=GpuSettings(nvml="off"))
    root = {"authorization": "Bearer root-secret"}
    with serve(settings, ManualClock(T0)) as (base, _):
        made = httpx.post(f"{base}/api/v1/tokens", json={"name": "grafana", "role": "viewer"}, headers=root)
        assert made.status_code == 201
        first = made.json()["data"]
        viewer = {"authorization": f"Bearer {first['token']}"}
        assert httpx.get(f"{base}/api/v1/whoami", headers=viewer).json()["data"]["name"] == "grafana"
        assert httpx.post(f"{base}/api/v1/tokens", json={"name": "x", "role": "admin"}, headers=viewer).status_code == 403
        listed = httpx.get(f"{base}/api/v1/tokens", headers=root).json()["data"]
        assert {t["name"] for t in listed} == {"api_token", "grafana"} and first["token"] not in json.dumps(listed)
        rotated = httpx.post(f"{base}/api/v1/tokens/{first['id']}/rotate", json={"grace": "1h"}, headers=root).json()["data"]
        second = {"authorization": f"Bearer {rotated['new']['token']}"}
        assert httpx.get(f"{base}/api/v1/whoami", headers=viewer).status_code == 200  # the old one, in its grace
        assert httpx.get(f"{base}/api/v1/whoami", headers=second).status_code == 200
        assert httpx.delete(f"{base}/api/v1/tokens/{first['id']}", headers=root).status_code == 200
        assert httpx.get(f"{base}/api/v1/whoami", headers=viewer).status_code == 401  # at once, no restart
        assert httpx.post(f"{base}/api/v1/tokens", json={"name": "", "role": "viewer"}, headers=root).status_code == 422
        assert httpx.post(f"{base}/api/v1/tokens", json={"name": "y", "role": "god"}, headers=root).status_code == 422
        assert httpx.delete(f"{base}/api/v1/tokens/424242", headers=root).status_code == 404
        audit = httpx.get(f"{base}/api/v1/audit", headers=root).json()["data"]
        actions = [(e["action"], e["actor"]) for e in audit]
        assert actions[:3] == [("token.revoke", "api_token"), ("token.rotate", "api_token"), ("token.create", "api_token")]
        assert audit[0]["address"] == "127.0.0.1" and audit[0]["before"]["revoked_ms"] is None
        assert audit[0]["after"]["revoked_ms"] is not None


# -- OIDC ------------------------------------------------------------------------------------
ISSUER, AUDIENCE = "https://sso.example.test/realms/ops", "infermeter"


class Jwks:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.document = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()
        self.fetches = 0

    def sign(self, claims: dict[str, Any], key: Any = None, kid: str = "k1") -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300, "sub": "u-1", **claims}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture
def jwks() -> Iterator[tuple[Jwks, str]]:
    keys = Jwks()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            keys.fetches += 1
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(keys.document)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield keys, f"http://127.0.0.1:{server.server_address[1]}/certs"
    server.shutdown()


def test_oidc_tokens_map_claims_to_roles_and_are_verified(jwks: tuple[Jwks, str], tmp_path: Path) -> None:
    keys, url = jwks
    verifier = OidcVerifier(OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, role_claim="groups",
                                         roles={"ml-ops": "operator", "platform-admins": "admin"}))
    auth = Authenticator(_store(f"sqlite:///{tmp_path / 'o.db'}", ManualClock(T0)), verifier, lambda: False)
    auth.tokens.find("imt_unknown")  # the token table read once
    assert auth.may_block("Bearer " + keys.sign({})) and not auth.may_block("Bearer imt_opaque")
    both = auth.principal("Bearer " + keys.sign({"groups": ["ml-ops", "platform-admins"], "preferred_username": "kim"}))
    assert both is not None and (both.name, both.role, both.via) == ("kim", Role.ADMIN, "oidc")
    ops = auth.principal("Bearer " + keys.sign({"groups": "ml-ops"}))
    assert ops is not None and (ops.name, ops.role) == ("u-1", Role.OPERATOR)
    bad = {
        "unmapped group": (keys.sign({"groups": ["finance"]}), 403),
        "wrong audience": (keys.sign({"groups": ["ml-ops"], "aud": "other-app"}), 401),
        "wrong issuer": (keys.sign({"groups": ["ml-ops"], "iss": "https://evil.test"}), 401),
        "expired": (keys.sign({"groups": ["ml-ops"], "exp": int(time.time()) - 3600}), 401),
        "foreign key": (keys.sign({"groups": ["ml-ops"]}, key=rsa.generate_private_key(public_exponent=65537,
                                                                                     key_size=2048)), 401),
        "unsigned": (jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "groups": ["ml-ops"]},
                                "", algorithm="none"), 401),
    }
    for name, (token, status) in bad.items():
        with pytest.raises(Refused) as refused:
            auth.principal(f"Bearer {token}")
        assert refused.value.status == status, name
    assert keys.fetches <= 3  # keys are cached, refetched only for an unknown kid


def test_oidc_through_the_service_and_an_unreachable_issuer(jwks: tuple[Jwks, str], tmp_path: Path) -> None:
    keys, url = jwks
    for jwks_url, status in ((url, 200), ("http://127.0.0.1:9/certs", 503)):
        settings = Settings.model_validate({
            "server": {"open_reads": False}, "store": {"url": f"sqlite:///{tmp_path / f'{status}.db'}"},
            "gpu": {"nvml": "off"},
            "security": {"oidc": {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": jwks_url,
                                  "roles": {"viewers": "viewer"}}},
        })
        with serve(settings, ManualClock(T0)) as (base, _):
            token = keys.sign({"roles": ["viewers"], "preferred_username": "lee"})
            answer = httpx.get(f"{base}/api/v1/whoami", headers={"authorization": f"Bearer {token}"})
            assert answer.status_code == status, answer.text
            if status == 200:
                assert answer.json()["data"] == {"name": "lee", "role": "viewer", "via": "oidc"}
                page = httpx.get(f"{base}/dashboard/_dash-layout", headers={"authorization": f"Bearer {token}"})
                assert page.status_code == 200
            else:
                assert "signing keys" in answer.json()["error"]
            assert httpx.get(f"{base}/api/v1/whoami").status_code == 401
