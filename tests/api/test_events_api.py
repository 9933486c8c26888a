"""Markers and comparisons over real HTTP: an operator records a deploy (audited, its author the
token's name), anyone with a read token lists it and compares the windows around it; bad payloads
answer 4xx naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from access.principal import Role
from infermeter.runtime import Runtime
from infermeter.settings import GpuSettings, ServerSettings, Settings, StoreSettings
from store import ManualClock
from store.types import Sample, SampleBatch, SeriesKey
from tests.releases.test_compare import ar_noise
from tests.service import serve

T0 = 1_800_000_000_000
MIN = 60_000


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Runtime, dict[str, str]]]:
    clock = ManualClock(T0)
    settings = Settings(server=ServerSettings(open_reads=False), store=StoreSettings(url=f"sqlite:///{tmp_path / 'e.db'}"),
                        gpu=GpuSettings(nvml="off"))
    with serve(settings, clock) as (base, runtime):
        secrets = {role.label: runtime.access.tokens.create(f"{role.label}-1", role, "test")[1] for role in Role}
        cost = SeriesKey.of("infermeter_cost_per_million_tokens_dollars", scope="model", model="m")
        noise = ar_noise(180, 3, sd=0.03)
        for i in range(180):  # 3 h, one value a minute; +20 % from minute 90
            at = T0 + i * MIN
            clock.set(at)
            runtime.store.append(SampleBatch.from_samples([Sample(cost, at, 5.0 * (1 + noise[i]) * (1.2 if i >= 90 else 1))]))
        yield base, runtime, secrets


def _auth(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


def test_record_list_compare_and_delete(served: tuple[str, Runtime, dict[str, str]]) -> None:
    base, runtime, secrets = served
    body = {"kind": "deploy", "model": "m", "version": "v2", "message": "new weights", "at": str((T0 + 90 * MIN) / 1000)}
    assert httpx.post(f"{base}/api/v1/events", json=body, headers=_auth(secrets["viewer"])).status_code == 403
    made = httpx.post(f"{base}/api/v1/events", json=body, headers=_auth(secrets["operator"]))
    assert made.status_code == 201, made.text
    event = made.json()["data"]
    assert event["actor"] == "operator-1" and event["at_ms"] == T0 + 90 * MIN
    audit = runtime.access.audit.entries(action="event.create")
    assert audit and audit[0]["actor"] == "operator-1" and audit[0]["after"]["version"] == "v2"
    listed = httpx.get(f"{base}/api/v1/events", params={"start": str(T0 / 1000), "model": "m"},
                       headers=_auth(secrets["viewer"])).json()["data"]
    assert [e["id"] for e in listed] == [event["id"]]
    compared = httpx.get(f"{base}/api/v1/compare", params={"event": event["id"], "window": "1h"},
                         headers=_auth(secrets["viewer"]), timeout=60)
    assert compared.status_code == 200, compared.text
    changes = {c["key"]: c for c in compared.json()["data"]["changes"]}
    cost = changes["cost_per_million_tokens"]
    assert cost["verdict"] == "worse" and cost["low"] > 0 and cost["change"] == pytest.approx(0.2, abs=0.05)
    assert changes["ttft_p99"]["verdict"].startswith("not measurable")
    assert httpx.delete(f"{base}/api/v1/events/{event['id']}", headers=_auth(secrets["operator"])).status_code == 403
    assert httpx.delete(f"{base}/api/v1/events/{event['id']}", headers=_auth(secrets["admin"])).status_code == 200
    assert httpx.delete(f"{base}/api/v1/events/{event['id']}", headers=_auth(secrets["admin"])).status_code == 404


def test_validations_history(served: tuple[str, Runtime, dict[str, str]]) -> None:
    from infermeter.validate import Check, Result
    from releases.runs import ValidationStore

    base, runtime, secrets = served
    history = ValidationStore(runtime.engine)
    first = Result("http://w:8000", "m", T0, T0 + MIN, [Check("function: tokens within max_tokens", "pass", "0", "0")])
    second = Result("http://w:8000", "m", T0 + 2 * MIN, T0 + 3 * MIN, [Check("performance: TTFT P99", "fail", "3 s", "≤ 2 s")])
    ids = [history.add(first.to_json()), history.add(second.to_json())]
    assert history.baseline("http://w:8000", "m")["id"] == ids[0]  # type: ignore[index]  # the last *passed* run
    got = httpx.get(f"{base}/api/v1/validations", headers=_auth(secrets["viewer"])).json()["data"]
    assert [(v["id"], v["verdict"]) for v in got] == [(ids[1], "fail"), (ids[0], "pass")]
    assert got[0]["checks"][0]["name"] == "performance: TTFT P99"


@pytest.mark.parametrize(("body", "status", "text"), [
    ({"kind": "rollout"}, 422, "kind: must be one of"),
    ({"kind": "deploy", "model": "m"}, 422, "needs model and version"),
    ({"kind": "config", "at": "yesterday"}, 400, "at: expected unix seconds"),
    ({"kind": "config", "colour": "red"}, 422, "colour"),
])
def test_bad_events(served: tuple[str, Runtime, dict[str, str]], body: dict[str, str], status: int, text: str) -> None:
    base, _, secrets = served
    r = httpx.post(f"{base}/api/v1/events", json=body, headers=_auth(secrets["operator"]))
    assert r.status_code == status and text in r.text


def test_bad_comparisons(served: tuple[str, Runtime, dict[str, str]]) -> None:
    base, _, secrets = served
    ask = lambda **p: httpx.get(f"{base}/api/v1/compare", params=p, headers=_auth(secrets["viewer"]))  # noqa: E731
    assert ask().status_code == 400 and "exactly one of event and at" in ask().text
    assert ask(event="12345").status_code == 404
    assert ask(at="now-10m").status_code == 400  # the after window is not over
    assert ask(at="now-2h", window="soon").status_code == 400
