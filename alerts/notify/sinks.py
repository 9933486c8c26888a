"""Transports: one HTTP POST per notification, and what its outcome means for retrying.

Every sink answers :class:`SendResult` — failures are data: ``retryable`` is decided here from
the status code or the kind of transport error, never parsed from a message later.

* 2xx: delivered.
* connection refused/reset, timeouts, 5xx, 408, 429: retryable; ``Retry-After`` (seconds or an
  HTTP date) is passed on as ``retry_after_ms``.
* any other 3xx/4xx: permanent; the status and the start of the body are kept for the report.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httpx

from alerts.notify.signing import signature_headers
from store.clock import Clock

BODY_EXCERPT = 512
USER_AGENT = "infermeter-notify/1"


@dataclass(frozen=True)
class Message:
    id: str  # the stable notification id (webhook-id)
    body: str
    created_ms: int
    attempt: int  # 1 for the first try


@dataclass(frozen=True)
class SendResult:
    ok: bool
    retryable: bool = False
    retry_after_ms: int | None = None
    status: int | None = None
    reason: str = "ok"  # ok | connect | timeout | transport | http_408 | http_429 | http_5xx | http_4xx | http_3xx | error
    detail: str = ""


class Sink(Protocol):
    timeout_s: float

    def send(self, message: Message, timeout_s: float) -> SendResult: ...

    def close(self) -> None: ...


ClientFactory = Callable[[], httpx.Client]


def default_client() -> httpx.Client:
    return httpx.Client(follow_redirects=False, headers={"user-agent": USER_AGENT})


def parse_retry_after(value: str | None, now_ms: int) -> int | None:
    """``Retry-After: 120`` or ``Retry-After: Wed, 21 Oct 2015 07:28:00 GMT`` -> ms from now."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value) * 1000
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0, int(when.timestamp() * 1000) - now_ms)


def classify(response: httpx.Response, now_ms: int) -> SendResult:
    status = response.status_code
    if 200 <= status < 300:
        return SendResult(True, status=status)
    excerpt = response.text[:BODY_EXCERPT] if response.content else ""
    retry_after = parse_retry_after(response.headers.get("retry-after"), now_ms)
    if status in (408, 429) or status >= 500:
        reason = f"http_{status}" if status in (408, 429) else "http_5xx"
        return SendResult(False, True, retry_after, status, reason, excerpt)
    reason = "http_3xx" if status < 400 else "http_4xx"
    return SendResult(False, False, None, status, reason, excerpt)


def post(client: httpx.Client, url: str, body: bytes, headers: dict[str, str], timeout_s: float, now_ms: int) -> SendResult:
    try:
        response = client.post(url, content=body, headers=headers, timeout=timeout_s)
    except httpx.ConnectError as exc:
        return SendResult(False, True, reason="connect", detail=str(exc)[:BODY_EXCERPT])
    except httpx.TimeoutException as exc:
        return SendResult(False, True, reason="timeout", detail=f"{type(exc).__name__}: {exc}"[:BODY_EXCERPT])
    except httpx.HTTPError as exc:
        return SendResult(False, True, reason="transport", detail=f"{type(exc).__name__}: {exc}"[:BODY_EXCERPT])
    return classify(response, now_ms)


class _HttpSink:
    def __init__(self, url: str, timeout_s: float, clock: Clock, client_factory: ClientFactory = default_client) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._clock = clock
        self._client = client_factory()

    def _headers(self, message: Message, body: bytes) -> dict[str, str]:
        return {"content-type": "application/json"}

    def send(self, message: Message, timeout_s: float) -> SendResult:
        body = message.body.encode()
        return post(self._client, self.url, body, self._headers(message, body), timeout_s, self._clock.now_ms())

    def close(self) -> None:
        self._client.close()


class WebhookSink(_HttpSink):
    """Alertmanager v4 JSON with Standard Webhooks headers (signed when a secret is configured).

    ``webhook-id`` is the notification's id on every attempt; ``webhook-timestamp`` is the
    attempt's time, so a receiver's replay window applies to each attempt.
    """

    def __init__(
        self, url: str, timeout_s: float, clock: Clock, secret: str | None = None,
        client_factory: ClientFactory = default_client,
    ) -> None:
        super().__init__(url, timeout_s, clock, client_factory)
        self._secret = secret

    def _headers(self, message: Message, body: bytes) -> dict[str, str]:
        stamp = self._clock.now_ms() // 1000
        return {"content-type": "application/json", **signature_headers(self._secret, message.id, stamp, body)}


class AlertmanagerSink(_HttpSink):
    """``POST {base}/api/v2/alerts``; Alertmanager de-duplicates by label set itself."""

    def __init__(self, base_url: str, timeout_s: float, clock: Clock, client_factory: ClientFactory = default_client) -> None:
        super().__init__(base_url.rstrip("/") + "/api/v2/alerts", timeout_s, clock, client_factory)


class SlackSink(_HttpSink):
    """Slack-style incoming webhook; Slack answers 200 ``ok`` and 429 with Retry-After."""
