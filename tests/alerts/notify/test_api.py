"""The silences API over real loopback HTTP (uvicorn in a thread), with a write-auth dependency."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, HTTPException, Request

from alerts.notify.api import silences_router
from alerts.notify.service import Notifier
from store import ManualClock
from tests.alerts.notify.conftest import NotifierFactory, alert, free_port

TOKEN = "s3cret"
AUTH = {"authorization": f"Bearer {TOKEN}"}


class Editor:
    """Writes need the token; changes are kept as the audit log would get them."""

    name: str | None = None
    changes: list[tuple[str, str]] = []

    def record(self, action: str, target: str, before: object, after: object) -> None:
        self.changes.append((action, target))


def require_writer(request: Request) -> Editor:
    if request.headers.get("authorization") != f"Bearer {TOKEN}":
        raise HTTPException(401, "a valid bearer token is required")
    return Editor()


@pytest.fixture
def api(make_notifier: NotifierFactory) -> Iterator[tuple[str, Notifier]]:
    notifier = make_notifier()
    app = FastAPI()
    app.include_router(silences_router(lambda: notifier.silences, require_writer))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield base, notifier
    server.should_exit = True
    thread.join(10)


def _silence(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "matchers": [{"name": "alertname", "value": "GpuHot", "isRegex": False},
                     {"name": "instance", "value": "n[12]", "isRegex": True, "isEqual": True}],
        "startsAt": "2027-01-15T07:00:00Z",  # in the past: starts now
        "endsAt": "2027-01-15T10:00:00Z",
        "createdBy": "ops@example.com",
        "comment": "driver upgrade",
    }
    body.update(overrides)
    return body


def test_create_list_update_expire(api: tuple[str, Notifier], clock: ManualClock) -> None:
    base, notifier = api
    assert httpx.post(f"{base}/api/v1/silences", json=_silence()).status_code == 401
    reply = httpx.post(f"{base}/api/v1/silences", json=_silence(), headers=AUTH)
    assert reply.status_code == 200, reply.text
    sid = reply.json()["silenceID"]
    [listed] = httpx.get(f"{base}/api/v1/silences").json()
    assert listed["id"] == sid and listed["status"] == {"state": "active"}
    assert listed["startsAt"] == "2027-01-15T08:00:00.000Z" and listed["endsAt"] == "2027-01-15T10:00:00.000Z"
    assert listed["matchers"][1] == {"name": "instance", "value": "n[12]", "isRegex": True, "isEqual": True}
    assert notifier.silences.muted_by({"alertname": "GpuHot", "instance": "n2"}, clock.now_ms()) == [sid]
    assert notifier.silences.muted_by({"alertname": "GpuHot", "instance": "n3"}, clock.now_ms()) == []

    # Same matchers: updated in place, same id.
    reply = httpx.post(f"{base}/api/v1/silences", json=_silence(id=sid, endsAt="2027-01-15T12:00:00Z"), headers=AUTH)
    assert reply.json() == {"silenceID": sid}
    assert httpx.get(f"{base}/api/v1/silence/{sid}").json()["endsAt"] == "2027-01-15T12:00:00.000Z"
    # Other matchers: the old one expires, a new one takes over.
    changed = _silence(id=sid, matchers=[{"name": "alertname", "value": "GpuCold", "isRegex": False}])
    new_id = httpx.post(f"{base}/api/v1/silences", json=changed, headers=AUTH).json()["silenceID"]
    assert new_id != sid
    states = {s["id"]: s["status"]["state"] for s in httpx.get(f"{base}/api/v1/silences").json()}
    assert states == {sid: "expired", new_id: "active"}

    assert httpx.delete(f"{base}/api/v1/silence/{new_id}").status_code == 401
    gone = httpx.delete(f"{base}/api/v1/silence/{new_id}", headers=AUTH)
    assert gone.status_code == 200 and gone.json()["status"] == {"state": "expired"}
    assert httpx.delete(f"{base}/api/v1/silence/{new_id}", headers=AUTH).status_code == 200  # idempotent
    assert httpx.delete(f"{base}/api/v1/silence/nope", headers=AUTH).status_code == 404
    assert httpx.post(f"{base}/api/v1/silences", json=_silence(id="nope"), headers=AUTH).status_code == 404


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (_silence(matchers=[{"name": "instance", "value": "(", "isRegex": True}]), ["body", "matchers", 0, "value"]),
        # a backreference: Python's re takes it, RE2 (what matches) does not
        (_silence(matchers=[{"name": "instance", "value": r"(a)\1", "isRegex": True}]), ["body", "matchers", 0, "value"]),
        (_silence(matchers=[{"name": "1bad", "value": "x"}]), ["body", "matchers", 0, "name"]),
        (_silence(matchers=[]), ["body", "matchers"]),
        (_silence(matchers=[{"name": "team", "value": ".*", "isRegex": True}]), ["body", "matchers"]),
        (_silence(endsAt="2027-01-15T06:00:00Z"), ["body", "endsAt"]),
        (_silence(startsAt="2027-01-15T11:00:00Z"), ["body", "endsAt"]),
        (_silence(endsAt="tomorrow"), ["body", "endsAt"]),
        (_silence(createdBy=""), ["body", "createdBy"]),
        (_silence(comment=None), ["body", "comment"]),
        (_silence(colour="blue"), ["body", "colour"]),
    ],
)
def test_bad_payloads_name_the_field(api: tuple[str, Notifier], body: dict[str, object], loc: list[object]) -> None:
    base, notifier = api
    reply = httpx.post(f"{base}/api/v1/silences", json=body, headers=AUTH)
    assert reply.status_code == 422, reply.text
    assert [e["loc"] for e in reply.json()["detail"]] == [loc]
    assert notifier.silences.all() == []


def test_silence_created_through_the_api_mutes_the_pipeline(api: tuple[str, Notifier], clock: ManualClock) -> None:
    base, notifier = api
    httpx.post(f"{base}/api/v1/silences", json=_silence(), headers=AUTH).raise_for_status()
    notifier.submit([alert("GpuHot", instance="n1"), alert("GpuHot", instance="n7")])
    notifier.pipeline.tick()
    clock.advance(30_000)
    notifier.pipeline.tick()
    [row] = notifier.outbox.rows()
    assert '"instance":"n7"' in row.body and '"instance":"n1"' not in row.body
