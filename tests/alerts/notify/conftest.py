"""Helpers for notification tests: a scripted webhook receiver on loopback, alert builders,
and notifiers on real databases driven by a fake clock."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from alerts.model import Alert
from alerts.notify.config import NotifyConfig
from alerts.notify.service import Notifier
from alerts.notify.signing import SignatureError, verify
from store import ManualClock, create_store_engine
from tests.conftest import T0

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def alert(name: str, status: str = "firing", starts: int = T0, ends: int | None = None, **labels: str) -> Alert:
    return Alert(
        labels={"alertname": name, "severity": "warning", **labels},
        annotations={"summary": f"{name} on {labels.get('instance', '?')}"},
        status="resolved" if status == "resolved" else "firing",
        starts_at_ms=starts,
        ends_at_ms=ends,
        generator_url="http://infermeter.test/rules",
    )


@dataclass
class Delivery:
    id: str
    body: bytes
    headers: dict[str, str]
    at: float  # monotonic
    answered: int

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A webhook collector on 127.0.0.1. Answers from ``script`` first (status, headers, body),
    then 200. With a secret it answers 401 to a bad signature (which would fail the test)."""

    port: int
    secret: str | None = None
    script: deque[tuple[int, dict[str, str], bytes]] = field(default_factory=deque)
    deliveries: list[Delivery] = field(default_factory=list)
    bad_signatures: int = 0
    now_s: Callable[[], int] = field(default=lambda: int(time.time()))
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, reply = 200, b"ok"
                extra: dict[str, str] = {}
                if receiver.secret is not None:
                    try:
                        verify(receiver.secret, headers, body, now_s=receiver.now_s())
                    except SignatureError as exc:
                        with receiver._lock:
                            receiver.bad_signatures += 1
                        status, reply = 401, str(exc).encode()
                if status == 200:
                    with receiver._lock:
                        if receiver.script:
                            status, extra, reply = receiver.script.popleft()
                with receiver._lock:
                    receiver.deliveries.append(
                        Delivery(headers.get("webhook-id", ""), body, headers, time.monotonic(), status)
                    )
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def accepted(self) -> list[Delivery]:
        with self._lock:
            return [d for d in self.deliveries if d.answered == 200]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(free_port(), SECRET)
    yield r
    r.stop()


def config(url: str = "http://127.0.0.1:9/hook", **overrides: Any) -> NotifyConfig:
    """Short, test-sized timings; one webhook receiver named "hook" as the root receiver."""
    base: dict[str, Any] = {
        "route": {"receiver": "hook", "group_by": ["alertname"], "group_wait": "30s",
                  "group_interval": "5m", "repeat_interval": "4h"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": url, "secret": SECRET, "timeout": "2s"}]}],
        "retry": {"initial_backoff": "1s", "max_backoff": "30s"},
        "resolve_timeout": "1h",
    }
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return NotifyConfig.model_validate(base)


NotifierFactory = Callable[..., Notifier]


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[Engine]:
    eng = create_store_engine(sqlite_url)
    yield eng
    eng.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def make_notifier(engine: Engine, clock: ManualClock) -> Iterator[NotifierFactory]:
    made: list[Notifier] = []
    counter = iter(range(1, 1_000_000))

    def factory(cfg: NotifyConfig | None = None, *, db: Engine | None = None, **kwargs: Any) -> Notifier:
        kwargs.setdefault("new_id", lambda: f"msg_{next(counter):04d}")
        notifier = Notifier(cfg or config(), db or engine, clock, CollectorRegistry(), random.Random(7), **kwargs)
        made.append(notifier)
        return notifier

    yield factory
    for notifier in made:
        notifier.stop(5)


def sample(registry_owner: Notifier, name: str, **labels: str) -> float:
    """A metric value from the notifier's metrics (0 when the child does not exist)."""
    metric = {
        "sent": registry_owner.metrics.sent,
        "failed": registry_owner.metrics.failed,
        "retries": registry_owner.metrics.retries,
        "enqueued": registry_owner.metrics.enqueued,
    }[name]
    total = 0.0
    for family in metric.collect():
        for s in family.samples:
            if s.name.endswith("_total") and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
