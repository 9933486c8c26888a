"""Bad queries are 4xx answers that say what is wrong, never a 500 from inside; and when a bug
does raise, the answer is a JSON 500 naming the route, counted in infermeter_http_requests_total."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from infermeter.runtime import Runtime
from infermeter.settings import GpuSettings, Settings, StoreSettings
from store import ManualClock
from tests.conftest import T0
from tests.service import serve

AT = str(T0 / 1000)


@pytest.fixture
def service(sqlite_url: str) -> Iterator[tuple[str, Runtime]]:
    settings = Settings(store=StoreSettings(url=sqlite_url), gpu=GpuSettings(nvml="off"))
    with serve(settings, ManualClock(T0 + 600_000)) as (base, runtime):
        body = {"samples": [{"metric": "plain", "labels": {"a": "b"}, "ts": T0, "value": 1}]}
        assert httpx.post(f"{base}/api/v1/samples", json=body).status_code < 300
        yield base, runtime


def _count(base: str, route: str, code: str) -> float:
    for line in httpx.get(f"{base}/metrics").text.splitlines():
        if line.startswith("infermeter_http_requests_total{") and f'route="{route}"' in line and f'code="{code}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_deeply_nested_expressions_are_refused_by_position(service: tuple[str, Runtime]) -> None:
    base, _ = service
    for query, words in (("(" * 5000 + "1" + ")" * 5000, "nested deeper than 100"),
                         ("-" * 5000 + "1", "nested too deeply")):
        reply = httpx.get(f"{base}/api/v1/query", params={"query": query, "time": AT}, timeout=60)
        assert reply.status_code == 400, reply.text[:300]
        assert reply.json()["errorType"] == "bad_data" and words in reply.json()["error"]
    reply = httpx.get(f"{base}/api/v1/query", params={"query": "(" * 90 + "1" + ")" * 90, "time": AT})
    assert reply.status_code == 200 and reply.json()["data"]["result"][1] == "1"


def test_a_quantile_of_series_that_are_not_buckets_is_empty_not_an_error(service: tuple[str, Runtime]) -> None:
    base, _ = service
    reply = httpx.get(f"{base}/api/v1/query_range", params={"query": "plain", "start": AT, "end": str(T0 / 1000 + 600),
                                                            "step": "60", "quantile": "0.9"})
    assert reply.status_code == 200 and reply.json()["data"]["result"] == []


def test_malformed_dashboard_updates_are_400s(service: tuple[str, Runtime]) -> None:
    base, _ = service
    url = f"{base}/dashboard/_dash-update-component"
    for body, words in (({}, "no output"), ({"output": "nope.children", "inputs": []}, "no callback has the output"),
                        ([1, 2], "not a JSON object")):
        reply = httpx.post(url, json=body)
        assert reply.status_code == 400 and words in reply.json()["error"], reply.text[:300]
    reply = httpx.post(url, content=b"not json", headers={"content-type": "application/json"})
    assert reply.status_code == 400
    short = {"output": "edit-price-result.children", "inputs": [{"id": "edit-price-add", "property": "n_clicks",
                                                                 "value": 1}], "state": []}
    reply = httpx.post(url, json=short)  # the editor's callback takes five states: was a 500 (IndexError)
    assert reply.status_code == 400 and "takes 5 state, the body has 0" in reply.json()["error"], reply.text[:300]


def test_a_bug_is_a_json_500_naming_the_route_and_counted(service: tuple[str, Runtime],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    base, runtime = service

    def broken(*_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(runtime.reader, "range", broken)
    before = _count(base, "/api/v1/query_range", "500")
    reply = httpx.get(f"{base}/api/v1/query_range", params={"match[]": "plain", "query": "plain", "start": AT,
                                                            "end": str(T0 / 1000 + 600), "step": "60", "fn": "avg"})
    assert reply.status_code == 500
    assert reply.json() == {"status": "error", "errorType": "internal",
                            "error": "internal error in /api/v1/query_range: RuntimeError (the service log has the details)"}
    assert _count(base, "/api/v1/query_range", "500") == before + 1
    assert httpx.get(f"{base}/health").status_code == 200


def test_a_range_query_over_the_sample_limit_is_a_422_naming_the_setting(sqlite_url: str) -> None:
    from infermeter.settings import QuerySettings

    settings = Settings(store=StoreSettings(url=sqlite_url), gpu=GpuSettings(nvml="off"),
                        query=QuerySettings(max_samples=500))
    with serve(settings, ManualClock(T0 + 3_600_000)) as (base, _):
        samples = [{"metric": "load", "labels": {"n": str(i)}, "ts": T0 + k * 15_000, "value": k}
                   for i in range(4) for k in range(200)]
        assert httpx.post(f"{base}/api/v1/samples", json={"samples": samples}).status_code < 300
        window = {"start": AT, "end": str(T0 / 1000 + 3000), "step": "15"}
        # 4 series x 201 steps = 804 values at once: over 500
        big = httpx.get(f"{base}/api/v1/query_range", params={"query": "load", **window})
        assert big.status_code == 422, big.text[:300]
        assert big.json()["errorType"] == "execution"
        assert "too many samples" in big.json()["error"] and "query.max_samples = 500" in big.json()["error"]
        # the same data asked in a size that fits is answered
        small = httpx.get(f"{base}/api/v1/query_range", params={"query": "sum(load)", "start": AT,
                                                                "end": str(T0 / 1000 + 1500), "step": "60"})
        assert small.status_code == 200 and len(small.json()["data"]["result"][0]["values"]) == 26
