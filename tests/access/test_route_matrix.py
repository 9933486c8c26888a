"""Every route, by every role: the whole OpenAPI and the dashboard's Flask routes, asked without a
token, with a viewer's, an operator's and an admin's, answer as access.policy says (401 without
credentials, 403 below the role, anything else at or above it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from access.policy import required_role
from access.principal import Role
from infermeter.runtime import Runtime
from infermeter.settings import GpuSettings, ServerSettings, Settings, StoreSettings
from store.clock import ManualClock
from tests.service import serve

T0 = 1_764_000_000_000
PARAMS = {"name": "job", "silence_id": "no-such-silence", "token_id": "999999", "event_id": "999999"}
DENIED = (401, 403)


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[str, Runtime, dict[str, str]]]:
    settings = Settings(server=ServerSettings(open_reads=False), store=StoreSettings(url=f"sqlite:///{tmp_path / 'm.db'}"),
                        gpu=GpuSettings(nvml="off"))
    with serve(settings, ManualClock(T0)) as (base, runtime):
        secrets = {role.label: runtime.access.tokens.create(f"{role.label}-1", role, "test")[1] for role in Role}
        yield base, runtime, secrets


def _operations(base: str) -> list[tuple[str, str]]:
    spec = httpx.get(f"{base}/openapi.json").json()
    return [(method.upper(), path) for path, ops in spec["paths"].items() for method in ops]


def _ask(base: str, method: str, path: str, secret: str | None) -> httpx.Response:
    url = base + re.sub(r"\{(\w+)\}", lambda m: PARAMS[m.group(1)], path)
    headers = {"authorization": f"Bearer {secret}"} if secret else {}
    kwargs: dict[str, Any] = {"json": {}} if method in ("POST", "PUT") else {}
    return httpx.request(method, url, headers=headers, timeout=30, **kwargs)


def test_every_api_route_answers_each_role_as_the_policy_says(locked: tuple[str, Runtime, dict[str, str]]) -> None:
    base, _, secrets = locked
    operations = _operations(base)
    assert len(operations) >= 40
    counted: dict[str, int] = {"open": 0, **{r.label: 0 for r in Role}}
    for method, path in operations:
        needed = required_role(method, path)
        counted["open" if needed is None else needed.label] += 1
        anonymous = _ask(base, method, path, None)
        if needed is None:
            assert anonymous.status_code not in DENIED, (method, path)
            continue
        assert anonymous.status_code == 401, (method, path, anonymous.status_code)
        assert anonymous.headers.get("www-authenticate") == "Bearer"
        assert anonymous.json()["errorType"] == "unauthorized"
        for role in Role:
            answer = _ask(base, method, path, secrets[role.label])
            if role >= needed:
                assert answer.status_code not in DENIED, (method, path, role.label, answer.text[:200])
            else:
                assert answer.status_code == 403, (method, path, role.label, answer.status_code)
                assert needed.label in answer.json()["error"]
    # the routes the issue names among the reads, and the writes of each role, are all covered
    assert counted["viewer"] >= 25 and counted["operator"] >= 4 and counted["admin"] >= 8


def test_reads_named_by_the_issue_are_locked(locked: tuple[str, Runtime, dict[str, str]]) -> None:
    base = locked[0]
    for path in ("/api/v1/query?query=up", "/api/v1/query_range?query=up&start=0&end=60&step=15",
                 "/api/v1/federate?match[]=up", "/api/v1/series?match[]=up", "/api/v1/label/job/values",
                 "/api/v1/targets", "/api/v1/silences", "/api/v1/forecast", "/metrics", "/api/v1/labels"):
        assert httpx.get(base + path).status_code == 401, path
    assert httpx.post(f"{base}/api/v1/query", data={"query": "up"}).status_code == 401
    assert httpx.get(f"{base}/health").status_code == 200 and httpx.get(f"{base}/ready").status_code in (200, 503)


def test_every_dashboard_route_needs_a_viewer(locked: tuple[str, Runtime, dict[str, str]]) -> None:
    base, runtime, secrets = locked
    app_routes = list(runtime_app_rules(base, secrets["viewer"]))
    assert len(app_routes) >= 8
    for url in app_routes:
        assert httpx.get(url).status_code == 401, url
        answer = httpx.get(url, headers={"authorization": f"Bearer {secrets['viewer']}"})
        assert answer.status_code not in DENIED, url
    bad = httpx.get(f"{base}/dashboard/", headers={"authorization": "Bearer imt_not-a-token"})
    assert bad.status_code == 401


def runtime_app_rules(base: str, secret: str) -> Iterator[str]:
    """Concrete URLs of the dashboard's Flask rules (pages, Dash's routes, a bundle)."""
    index = httpx.get(f"{base}/dashboard/", headers={"authorization": f"Bearer {secret}"})
    bundle = re.findall(r'src="/dashboard/(_dash-component-suites/dash/[^"]+)"', index.text)[0]
    for path in ("", "gpus", "cost", "alerts", "_dash-layout", "_dash-dependencies", "_reload-hash",
                 "_favicon.ico", bundle, "assets/nothing.css"):
        yield f"{base}/dashboard/{path}"


def test_open_reads_make_anonymous_a_viewer_only(tmp_path: Path) -> None:
    settings = Settings(server=ServerSettings(api_token="admin-secret"),
                        store=StoreSettings(url=f"sqlite:///{tmp_path / 'o.db'}"), gpu=GpuSettings(nvml="off"))
    with serve(settings, ManualClock(T0)) as (base, _):
        assert httpx.get(f"{base}/api/v1/query", params={"query": "1"}).status_code == 200
        assert httpx.get(f"{base}/dashboard/_dash-layout").status_code == 200
        who = httpx.get(f"{base}/api/v1/whoami").json()["data"]
        assert who == {"name": "anonymous", "role": "viewer", "via": "anonymous"}
        assert httpx.post(f"{base}/api/v1/silences", json={}).status_code == 401
        assert httpx.get(f"{base}/api/v1/tokens").status_code == 401
        admin = {"authorization": "Bearer admin-secret"}
        assert httpx.get(f"{base}/api/v1/whoami", headers=admin).json()["data"]["role"] == "admin"
        assert httpx.get(f"{base}/api/v1/tokens", headers=admin).status_code == 200
        wrong = httpx.request("PATCH", f"{base}/api/v1/budgets", headers=admin)  # routes of two modules
        assert wrong.status_code == 405 and wrong.headers["allow"] == "DELETE, GET, PUT"
        assert httpx.request("DELETE", f"{base}/api/v1/query").headers["allow"] == "GET, POST"
