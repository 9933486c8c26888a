"""Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
``{webhook-id}.{webhook-timestamp}.{body}`` with the key from ``whsec_<base64>``, sent as
``webhook-signature: v1,<base64>``. ``verify`` is what a receiver runs (the tests use it).

The HMAC itself is the ``standardwebhooks`` package's ``Webhook.sign``. Two things stay here:

* The secret is decoded by :func:`secret_key` (strict base64, ``whsec_`` prefix optional) and
  handed to ``Webhook`` as raw key bytes. ``Webhook(str)`` would also take it, but decodes
  leniently (characters outside the base64 alphabet are dropped silently), so a mistyped secret
  would sign with a different key instead of failing.
* :func:`verify` checks the timestamp against ``now_s`` (an injected clock, ``tolerance_s``)
  and tolerates malformed signature entries; ``Webhook.verify`` reads the wall clock with a
  fixed 5-minute window and raises ``ValueError`` on an entry without a comma. A receiver
  without a fake clock can use ``Webhook(secret).verify(body, headers)`` directly — the tests
  check that it accepts our signatures.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from datetime import UTC, datetime

from standardwebhooks import Webhook


class SignatureError(ValueError):
    pass


def secret_key(secret: str) -> bytes:
    """The key bytes of ``whsec_<base64>`` (or bare base64). Raises ``ValueError`` (binascii.Error)
    on invalid base64 and on an empty key (``Webhook`` refuses one)."""
    key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    if not key:
        raise ValueError("webhook secret may not be empty")
    return key


def sign(secret: str, msg_id: str, timestamp_s: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256>``. ``body`` is UTF-8 (the package signs text; bytes that are
    not UTF-8 raise ``UnicodeDecodeError``)."""
    stamp = datetime.fromtimestamp(timestamp_s, tz=UTC)
    return Webhook(secret_key(secret)).sign(msg_id, stamp, body.decode("utf-8"))


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
    try:
        expected = sign(secret, msg_id, timestamp, body).encode()
    except UnicodeDecodeError:
        raise SignatureError("body is not UTF-8") from None
    # The header may carry several space-separated signatures (key rotation).
    if not any(hmac.compare_digest(candidate.encode(), expected) for candidate in given.split()):
        raise SignatureError("no matching signature")
    return msg_id
