"""The mounted dashboard over real HTTP (no browser): the token gate on every route Dash and
Flask serve, every callback on seeded data, errors kept in their panel, the redirect and the
self-metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from access.authn import SESSION_COOKIE, session_value
from dashboard.settings import MAX_POINTS_PER_TRACE
from infermeter.runtime import Runtime
from store import ManualClock
from tests.dashboard.callbacks import calls, figure_facts, results
from tests.dashboard.fakes import FakeForecasts, flat_forecast
from tests.dashboard.service import make_settings, seed, serve_dashboard

pytestmark = pytest.mark.slow
T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z
TOKEN = "dashboard-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RANGE_6H = 6 * 3_600_000
# Panels that are empty on this data by design, with the words their empty state must contain.
EXPECTED_EMPTY = {"alerts-scale.children": "no scale recommendation"}
EITHER = {"alerts-problems.children"}  # a table of failing rules, or "every rule evaluates"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Runtime, FastAPI, FakeForecasts]]:
    tmp: Path = tmp_path_factory.mktemp("dash-service")
    settings, config = make_settings(tmp, token=TOKEN)
    seed(settings, config, T0, hours=3)
    forecasts = FakeForecasts({"spend:fleet": flat_forecast(T0, 32.0, 4.0), "cost_per_mtok:fleet": flat_forecast(T0, 3.9, 0.3)})
    with serve_dashboard(settings, ManualClock(T0), config, forecast=forecasts) as (base, runtime, app):
        yield base, runtime, app, forecasts


def concrete(rule: str, component_path: str) -> str:
    """A URL for a Flask rule, its variables filled with something it can serve."""
    filled = rule.replace("<string:package_name>", "dash").replace("<path:fingerprinted_path>", component_path)
    filled = re.sub(r"<path:path>", "gpus", filled)
    return re.sub(r"<[^>]+>", "nothing-here.css", filled)


def test_every_dashboard_route_needs_the_token(served: tuple[str, Runtime, FastAPI, FakeForecasts]) -> None:
    base, _, app, _ = served
    index = httpx.get(f"{base}/dashboard/", headers=AUTH)
    assert index.status_code == 200 and "_dash-config" in index.text
    suites = re.findall(r'src="/dashboard/(_dash-component-suites/dash/[^"]+)"', index.text)
    assert suites, "the index page loads Dash's bundles"
    component_path = suites[0].split("/dash/", 1)[1]
    rules = list(app.state.dashboard.server.url_map.iter_rules())
    names = {r.rule for r in rules}
    assert {"/_dash-layout", "/_dash-dependencies", "/_dash-update-component", "/_reload-hash", "/_favicon.ico",
            "/_dash-component-suites/<string:package_name>/<path:fingerprinted_path>", "/assets/<path:filename>",
            "/", "/<path:path>"} <= names
    walked = 0
    for rule in rules:
        url = f"{base}/dashboard{concrete(rule.rule, component_path)}"
        for method in sorted(rule.methods or ()):
            kwargs: dict[str, Any] = {"json": {}} if method == "POST" else {}
            refused = httpx.request(method, url, **kwargs)
            assert refused.status_code == 401, f"{method} {url} without the token: {refused.status_code}"
            if method != "HEAD":
                assert "token" in refused.text
            allowed = httpx.request(method, url, headers=AUTH, **kwargs)
            assert allowed.status_code not in (401, 403), f"{method} {url} with the token: {allowed.status_code}"
            walked += 1
    assert walked >= 25
    for path, kind in (("_dash-layout", "json"), ("_dash-dependencies", "json"), ("_reload-hash", "json"),
                       ("_favicon.ico", "image"), (suites[0], "javascript")):
        ok = httpx.get(f"{base}/dashboard/{path}", headers={**AUTH, "Accept-Encoding": "gzip"})
        assert ok.status_code == 200 and kind in ok.headers["content-type"], path
    bundle = httpx.get(f"{base}/dashboard/{suites[0]}", headers={**AUTH, "Accept-Encoding": "gzip"})
    assert bundle.headers.get("content-encoding") == "gzip"
    assert httpx.get(f"{base}/dashboard/assets/nothing-here.css", headers=AUTH).status_code == 404  # past the gate


def test_token_in_the_url_sets_a_session_cookie(served: tuple[str, Runtime, FastAPI, FakeForecasts]) -> None:
    base = served[0]
    assert httpx.get(f"{base}/dashboard/gpus?token=wrong").status_code == 401
    signed_in = httpx.get(f"{base}/dashboard/gpus?token={TOKEN}&x=1")
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/dashboard/gpus?x=1"
    cookie = signed_in.cookies[SESSION_COOKIE]
    assert cookie == session_value(served[1].access.tokens.find(TOKEN)) and TOKEN not in cookie  # type: ignore[arg-type]
    assert "httponly" in signed_in.headers["set-cookie"].lower() and "samesite=strict" in signed_in.headers["set-cookie"].lower()
    assert httpx.get(f"{base}/dashboard/_dash-layout", cookies={SESSION_COOKIE: cookie}).status_code == 200
    assert httpx.get(f"{base}/dashboard/_dash-layout", cookies={SESSION_COOKIE: "0" * 64}).status_code == 401
    assert httpx.get(f"{base}/dashboard/_dash-layout", cookies={SESSION_COOKIE: TOKEN}).status_code == 401
    assert httpx.get(f"{base}/dashboard/_dash-layout", headers={"Authorization": "Bearer nope"}).status_code == 401
    root = httpx.get(f"{base}/?token={TOKEN}")
    assert root.status_code == 307 and root.headers["location"] == f"/dashboard/?token={TOKEN}"
    assert httpx.get(f"{base}/health").status_code == 200  # the API itself is not behind the dashboard's gate


def call_all(base: str, range_ms: int = RANGE_6H, models: list[str] | None = None,
             shown: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every callback's outputs; ``shown``: what the browser holds already (the digest stores)."""
    deps = httpx.get(f"{base}/dashboard/_dash-dependencies", headers=AUTH).json()
    out: dict[str, Any] = {}
    values = {"dash-range": range_ms, "dash-model": models, "dash-node": None, "dash-refresh": 0, **(shown or {})}
    for call in calls(deps, values):
        reply = httpx.post(f"{base}/dashboard/_dash-update-component", json=call.body, headers=AUTH, timeout=60)
        assert reply.status_code in (200, 204), (call.name, reply.text[:300])  # 204: nothing to do (no click)
        if reply.status_code == 200:
            out.update(results(call, reply.json()))
    return out


def test_every_callback_draws_seeded_data_within_the_point_ceiling(served: tuple[str, Runtime, FastAPI, FakeForecasts]) -> None:
    base = served[0]
    values = call_all(base)
    figures = {k: figure_facts(v) for k, v in values.items() if k.endswith(".figure")}
    assert len(figures) >= 30
    for name, (state, points, message) in figures.items():
        assert state == "data", f"{name}: {state} {message}"
        assert points <= MAX_POINTS_PER_TRACE, name
    tables = {k: str(v) for k, v in values.items()
              if k.endswith(".children") and k.split(".")[0] not in ("dash-updated", "dash-role", "dash-user")}
    assert values["dash-role.children"] == ""  # alone, not in an HA pair: the header says nothing
    assert values["dash-user.children"] == "signed in: api_token (admin)"  # who the token names
    for name, text in tables.items():
        if name in EITHER:
            assert "panel-data" in text or "every rule evaluates" in text, name
        elif name in EXPECTED_EMPTY:
            assert EXPECTED_EMPTY[name] in text, name
        else:
            assert "panel-data" in text, f"{name}: {text[:200]}"
    assert "GpuXidError" in tables["alerts-active.children"] and "runbook" in tables["alerts-active.children"]
    assert "resolved" in tables["alerts-active.children"] and "GpuWarmForAnHour" in tables["alerts-active.children"]
    assert "fan replacement planned" in tables["alerts-silences.children"]
    assert "GpuTemperatureHigh" in tables["alerts-active.children"] and "silenced" in tables["alerts-active.children"]
    budget = values["cost-budget.figure"]
    assert any("crosses" in a["text"] for a in budget["layout"]["annotations"])  # the projected crossing is marked
    assert {o["label"] for o in values["dash-model.options"]} == {"llama-3-70b", "qwen2-7b"}


def test_a_refresh_whose_data_did_not_change_sends_no_figure(served: tuple[str, Runtime, FastAPI, FakeForecasts]) -> None:
    base = served[0]
    first = call_all(base)
    digests = {k.split(".")[0]: v for k, v in first.items() if k.endswith("-digest.data")}
    assert len(digests) == len([k for k in first if k.endswith(".figure")]) >= 30
    again = call_all(base, shown=digests)  # the live refresh: same clock, same data
    assert not [k for k in again if k.endswith(".figure")], "unchanged figures were sent again"
    assert "alerts-active.children" in again  # tables are not held back
    other = call_all(base, range_ms=RANGE_6H // 2, shown=digests)  # another range: new figures
    changed = {k for k in other if k.endswith(".figure")}
    assert "gpu-heatmap.figure" in changed and "req-e2e.figure" in changed
    assert {k.split(".")[0] for k in other if k.endswith("-digest.data")} == {k.split(".")[0] + "-digest" for k in changed}


def test_forecast_panels_say_so_when_a_scope_has_no_forecast(served: tuple[str, Runtime, FastAPI, FakeForecasts]) -> None:
    base = served[0]
    values = call_all(base, models=["llama-3-70b"])
    notes = " ".join(values["overview-spend.figure"]["layout"]["meta"].get("notes", []))
    assert "no forecast yet for spend:model=llama-3-70b" in notes
    assert figure_facts(values["overview-tokens.figure"])[0] == "data"
    assert [t["name"] for t in values["overview-tokens.figure"]["data"]] == ["llama-3-70b"]


def test_a_failing_source_shows_in_its_panels_only(served: tuple[str, Runtime, FastAPI, FakeForecasts],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    base, runtime, _, _ = served
    assert runtime.alerting is not None

    def broken(*_args: object, **_kwargs: object) -> list[dict[str, object]]:
        raise RuntimeError("ledger table is locked")

    monkeypatch.setattr(runtime.alerting.ledger, "spend", broken)
    values = call_all(base)
    state, _, message = figure_facts(values["cost-by-model.figure"])
    assert state == "error" and "ledger table is locked" in message
    assert figure_facts(values["cost-per-token.figure"])[0] == "data"
    assert figure_facts(values["gpu-heatmap.figure"])[0] == "data"
    assert httpx.get(f"{base}/metrics").status_code == 401  # reads are locked here: /metrics too
    metrics = httpx.get(f"{base}/metrics", headers=AUTH).text
    assert re.search(r'infermeter_dashboard_panel_errors_total\{panel="cost-by-model\+cost-by-node\+cost-by-gpu\+cost-by-tenant"\} [1-9]', metrics)
    assert "infermeter_dashboard_callback_seconds_bucket" in metrics
