"""The HTTP API over real loopback HTTP: ingest, errors that name what and where, queries."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import httpx
import pytest

from infermeter.settings import GpuSettings, ServerSettings, Settings, StoreSettings
from store import ManualClock
from tests.conftest import T0
from tests.service import serve


@pytest.fixture
def service(store_url: str) -> Iterator[tuple[str, ManualClock]]:
    clock = ManualClock(T0)
    settings = Settings(
        server=ServerSettings(max_body_bytes=64 * 1024),
        store=StoreSettings(url=store_url),
        gpu=GpuSettings(nvml="off"),  # no local collectors writing series beside the test's own
    )
    with serve(settings, clock) as (base, _runtime):
        yield base, clock


def _push(base: str, body: bytes | str, content_type: str = "application/json", **headers: str) -> httpx.Response:
    return httpx.post(f"{base}/api/v1/samples", content=body, headers={"content-type": content_type, **headers})


def _values(base: str, query: str) -> list[tuple[dict[str, str], str]]:
    reply = httpx.get(f"{base}/api/v1/query", params={"query": query, "time": str((T0 + 60_000) / 1000)})
    assert reply.status_code == 200, reply.text
    return [(r["metric"], r["value"][1]) for r in reply.json()["data"]["result"]]


def test_json_and_text_ingest_then_query(service: tuple[str, ManualClock]) -> None:
    base, _ = service
    body = {
        "samples": [{"metric": "gpu_util", "labels": {"gpu": "0"}, "ts": T0, "value": 42}],
        "series": [{"metric": "gpu_util", "labels": {"gpu": "1"}, "samples": [[T0, 7], [T0 + 15_000, "NaN"], [T0 + 30_000, 9]]}],
    }
    reply = _push(base, json.dumps(body))
    assert reply.status_code == 200, reply.text
    assert reply.json()["data"] == {"accepted": 4, "duplicates": 0, "rejected": {}}
    text = f'# TYPE power_w gauge\npower_w{{gpu="0",host="a"}} 301.25 {T0}\n'
    assert _push(base, text, "text/plain; version=0.0.4").status_code == 200
    assert _push(base, gzip.compress(text.encode()), "text/plain", **{"content-encoding": "gzip"}).json()["data"]["duplicates"] == 1
    assert sorted(_values(base, 'gpu_util{gpu=~"0|1"}'), key=lambda r: r[0]["gpu"]) == [
        ({"__name__": "gpu_util", "gpu": "0"}, "42"),
        ({"__name__": "gpu_util", "gpu": "1"}, "9"),
    ]
    assert _values(base, "power_w") == [({"__name__": "power_w", "gpu": "0", "host": "a"}, "301.25")]
    series = httpx.get(f"{base}/api/v1/series", params={"match[]": "gpu_util"}).json()["data"]
    assert {s["gpu"] for s in series} == {"0", "1"}
    names = httpx.get(f"{base}/api/v1/label/__name__/values").json()["data"]
    assert names == ["gpu_util", "power_w"]
    rng = httpx.get(
        f"{base}/api/v1/query_range",
        params={"query": 'gpu_util{gpu="1"}', "start": str(T0 / 1000), "end": str((T0 + 59_000) / 1000), "step": "60s", "fn": "max"},
    ).json()
    assert rng["data"]["result"][0]["values"] == [[T0 / 1000, "9"]]


def test_bad_payloads_name_the_problem_and_store_nothing(service: tuple[str, ManualClock]) -> None:
    base, _ = service
    lines = "\n".join(f'ok_metric{{i="{i}"}} {i} {T0}' for i in range(5)) + "\nbroken{i=\"x\"} notanumber\n"
    reply = _push(base, lines, "text/plain")
    assert reply.status_code == 400
    assert reply.json()["where"] == "line 6" and "notanumber" in reply.json()["error"]

    reply = _push(base, json.dumps({"samples": [{"metric": "m", "value": 1}, {"metric": "m", "value": "high"}]}))
    assert reply.status_code == 422
    assert reply.json()["where"] == "samples.1.value"
    reply = _push(base, json.dumps({"samples": [{"metric": "9bad", "value": 1}]}))
    assert reply.status_code == 422 and "invalid metric name" in reply.json()["error"]
    reply = _push(base, json.dumps({"samples": [{"metric": "m", "labels": {"__name__": "x"}, "value": 1}]}))
    assert reply.status_code == 422 and reply.json()["where"] == "samples.0.labels"
    reply = _push(base, b"{not json")
    assert reply.status_code == 422
    assert _push(base, b"x 1", "application/xml").status_code == 415
    assert _push(base, b"not gzip", "text/plain", **{"content-encoding": "gzip"}).status_code == 400

    big = "\n".join(f'big{{i="{i}"}} 1 {T0}' for i in range(5000))
    assert len(big) > 64 * 1024
    reply = _push(base, big, "text/plain")
    assert reply.status_code == 413 and "limit" in reply.json()["error"]
    bomb = gzip.compress(("#" * 2_000_000).encode())
    assert _push(base, bomb, "text/plain", **{"content-encoding": "gzip"}).status_code == 413

    for metric in ("ok_metric", "m", "big"):
        assert httpx.get(f"{base}/api/v1/series", params={"match[]": metric}).json()["data"] == []


def test_query_parameter_errors(service: tuple[str, ManualClock]) -> None:
    """Prometheus's error shape: 400 bad_data naming the parameter and, for an expression, the
    line:column of the problem."""
    base, _ = service
    bad = [
        ({"query": "gpu_util{gpu=0}", "start": "0", "end": "60", "step": "15"}, 'invalid parameter "query": 1:14: parse error'),
        ({"start": "0", "end": "60", "step": "15"}, 'invalid parameter "query": query must not be empty'),
        ({"query": "x", "start": "yesterday", "end": "60", "step": "15"}, 'invalid parameter "start"'),
        ({"query": "x", "start": "0", "end": "60", "step": "-5s"}, 'invalid parameter "step"'),
        ({"query": "x", "start": "0", "end": "60"}, "zero or negative query resolution step"),
        ({"query": "x", "start": "60", "end": "0", "step": "15"}, "end timestamp must not be before start time"),
        ({"query": "x", "start": "0", "end": "1000000", "step": "1s"}, "exceeded maximum resolution of 11,000 points"),
        ({"query": "x", "fn": "median"}, "unknown function"),  # the legacy stepped fold
    ]
    for params, message in bad:
        for reply in (httpx.get(f"{base}/api/v1/query_range", params=params),
                      httpx.post(f"{base}/api/v1/query_range", data=params)):
            assert reply.status_code == 400, (params, reply.text)
            body = reply.json()
            assert body["status"] == "error" and body["errorType"] == "bad_data", body
            assert message in body["error"], (params, body)


def test_health_ready_metrics_and_openapi(service: tuple[str, ManualClock]) -> None:
    base, _ = service
    assert httpx.get(f"{base}/health").json() == {"status": "ok"}
    assert httpx.get(f"{base}/ready").json() == {"status": "ready", "ha": {"role": "single"}}
    _push(base, json.dumps({"samples": [{"metric": "m", "ts": T0, "value": 1}]}))
    metrics = httpx.get(f"{base}/metrics").text
    assert "infermeter_store_samples_appended_total 1.0" in metrics
    assert 'infermeter_http_requests_total{code="200",route="/api/v1/samples"}' in metrics
    assert 'infermeter_thread_cpu_seconds_total{thread="MainThread"}' in metrics
    spec = httpx.get(f"{base}/openapi.json").json()
    assert {"/api/v1/samples", "/api/v1/query_range", "/api/v1/series", "/ready"} <= set(spec["paths"])


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_write_requires_token_when_configured(store_url: str) -> None:
    settings = Settings(server=ServerSettings(api_token="s3cret"), store=StoreSettings(url=store_url), gpu=GpuSettings(nvml="off"))
    body = json.dumps({"samples": [{"metric": "m", "ts": T0, "value": 1}]})
    with serve(settings, ManualClock(T0)) as (base, _):
        assert _push(base, body).status_code == 401
        assert _push(base, body, authorization="Bearer wrong").status_code == 401
        assert _push(base, body, authorization="Bearer s3cret").status_code == 200
        assert httpx.get(f"{base}/api/v1/series", params={"match[]": "m"}).status_code == 200


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_ready_reports_schema_behind(store_url: str, tmp_path: object) -> None:
    from sqlalchemy import text

    from store import create_store_engine

    settings = Settings(store=StoreSettings(url=store_url))
    with serve(settings, ManualClock(T0)) as (base, runtime):
        engine = create_store_engine(store_url)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'old'"))
        engine.dispose()
        reply = httpx.get(f"{base}/ready")
        assert reply.status_code == 503
        assert "infermeter db upgrade" in reply.json()["problems"]["schema"]
        with runtime.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))


def _write_request(series: list[tuple[dict[str, str], list[tuple[int, float]]]]) -> bytes:
    import cramjam

    from collector.remote_write.proto import write_request_class

    request = write_request_class()()
    for labels, samples in series:
        ts = request.timeseries.add()
        for name, value in labels.items():
            ts.labels.add(name=name, value=value)
        for t, v in samples:
            ts.samples.add(timestamp=t, value=v)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def test_prometheus_remote_write(service: tuple[str, ManualClock]) -> None:
    base, _ = service
    body = _write_request(
        [
            ({"__name__": "gpu_util", "gpu": "0", "job": "prom"}, [(T0, 50.0), (T0 + 15_000, 55.0)]),
            ({"__name__": "gpu_util", "gpu": "1", "job": "prom"}, [(T0, 70.0)]),
        ]
    )
    headers = {"content-type": "application/x-protobuf", "content-encoding": "snappy", "x-prometheus-remote-write-version": "0.1.0"}
    reply = httpx.post(f"{base}/api/v1/write", content=body, headers=headers)
    assert reply.status_code == 200, reply.text
    assert reply.json()["data"]["accepted"] == 3
    assert sorted(_values(base, 'gpu_util{job="prom"}'), key=lambda r: r[0]["gpu"]) == [
        ({"__name__": "gpu_util", "gpu": "0", "job": "prom"}, "55"),
        ({"__name__": "gpu_util", "gpu": "1", "job": "prom"}, "70"),
    ]
    bad = httpx.post(f"{base}/api/v1/write", content=b"not snappy at all", headers=headers)
    assert bad.status_code == 400 and "snappy" in bad.json()["error"]
    nameless = _write_request([({"gpu": "0"}, [(T0, 1.0)])])
    reply = httpx.post(f"{base}/api/v1/samples", content=nameless, headers=headers)
    assert reply.status_code == 422 and reply.json()["where"] == "timeseries.0"
