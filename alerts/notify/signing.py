"""Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
``{webhook-id}.{webhook-timestamp}.{body}`` with the key from ``whsec_<base64>``, sent as
``webhook-signature: v1,<base64>``. ``verify`` is what a receiver runs (the tests use it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping


class SignatureError(ValueError):
    pass


def secret_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_"), validate=True)


def sign(secret: str, msg_id: str, timestamp_s: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp_s}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_headers(secret: str | None, msg_id: str, timestamp_s: int, body: bytes) -> dict[str, str]:
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp_s)}
    if secret:
        headers["webhook-signature"] = sign(secret, msg_id, timestamp_s, body)
    return headers


def verify(secret: str, headers: Mapping[str, str], body: bytes, now_s: int, tolerance_s: int = 300) -> str:
    """Checks a delivery; returns its webhook-id. Raises SignatureError naming what is wrong."""
    msg_id = headers.get("webhook-id")
    stamp = headers.get("webhook-timestamp")
    given = headers.get("webhook-signature")
    if not msg_id or not stamp or not given:
        raise SignatureError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise SignatureError("webhook-timestamp is not an integer") from None
    if abs(now_s - timestamp) > tolerance_s:
        raise SignatureError("webhook-timestamp outside the tolerance")
    expected = sign(secret, msg_id, timestamp, body).encode()
    # The header may carry several space-separated signatures (key rotation).
    if not any(hmac.compare_digest(candidate.encode(), expected) for candidate in given.split()):
        raise SignatureError("no matching signature")
    return msg_id
