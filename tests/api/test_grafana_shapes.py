"""The requests Grafana 10/11's Prometheus datasource sends, replayed against the service: the
"Save & test" check, version detection, a time series panel, a stat panel, template variables
(label_values, metrics, query_result), Explore's metrics browser and code editor. Each answers
200 in Prometheus's shape; the bad-input cases answer in Prometheus's error shape."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from infermeter.settings import GpuSettings, QuerySettings, Settings, StoreSettings
from store import SampleBatch, SeriesKey
from store.clock import ManualClock
from tests.service import serve

T0 = 1_800_000_000_000
FORM = {"content-type": "application/x-www-form-urlencoded", "X-Grafana-Org-Id": "1", "User-Agent": "Grafana/11.1.0"}


@pytest.fixture(scope="module")
def grafana_view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from infermeter import db
    from store import create_store_engine

    url = f"sqlite:///{tmp_path_factory.mktemp('grafana') / 'store.db'}"
    engine = create_store_engine(url)
    db.upgrade(engine)
    engine.dispose()
    clock = ManualClock(T0 + 3_600_000)
    settings = Settings(store=StoreSettings(url=url), gpu=GpuSettings(nvml="off"), query=QuerySettings(timeout=30_000))
    with serve(settings, clock) as (base, runtime):
        ts = T0 + np.arange(240, dtype=np.int64) * 15_000
        for gpu in range(4):
            labels = {"host": "node-a", "gpu": str(gpu), "gpu_model": "NVIDIA H100 80GB HBM3", "job": "dcgm"}
            util = SeriesKey.of("gpu_utilization_ratio", labels)
            runtime.store.append(SampleBatch([util], np.zeros(240, np.int64), ts, 0.2 * gpu + 0.1 * np.sin(np.arange(240) / 9)))
        tokens = SeriesKey.of("inference_generation_tokens_total", model="llama", job="vllm", instance="node-a:8000")
        runtime.store.append(SampleBatch([tokens], np.zeros(240, np.int64), ts, np.cumsum(np.full(240, 450.0))))
        yield base


def _ok(reply: httpx.Response) -> object:
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "success", body
    return body["data"]


START, END = str((T0 + 600_000) // 1000), str((T0 + 3_000_000) // 1000)


def test_save_and_test_and_version_detection(grafana_view: str) -> None:
    with httpx.Client(base_url=grafana_view, headers=FORM) as c:
        data = _ok(c.post("/api/v1/query", content=f"query=1%2B1&time={END}"))
        assert data == {"resultType": "scalar", "result": [float(END), "2"]}
        info = _ok(c.get("/api/v1/status/buildinfo"))
        assert isinstance(info, dict) and info["version"].startswith("2.")


def test_time_series_and_stat_panels(grafana_view: str) -> None:
    with httpx.Client(base_url=grafana_view, headers=FORM) as c:
        body = (f"query=avg+by+(gpu)+(gpu_utilization_ratio%7Bhost%3D%22node-a%22%7D)"
                f"&start={START}&end={END}&step=60")
        data = _ok(c.post("/api/v1/query_range", content=body))
        assert isinstance(data, dict) and data["resultType"] == "matrix"
        assert [r["metric"] for r in data["result"]] == [{"gpu": str(g)} for g in range(4)]
        values = data["result"][0]["values"]
        assert values[0][0] == float(START) and values[-1][0] == float(END)  # start through end, every step
        assert len(values) == (int(END) - int(START)) // 60 + 1
        stat = _ok(c.post("/api/v1/query", content=f"query=sum(rate(inference_generation_tokens_total%5B5m%5D))&time={END}"))
        assert isinstance(stat, dict) and stat["resultType"] == "vector"
        assert float(stat["result"][0]["value"][1]) == pytest.approx(30.0)  # 450 tokens per 15 s


def test_template_variables(grafana_view: str) -> None:
    with httpx.Client(base_url=grafana_view) as c:
        # label_values(gpu_utilization_ratio, gpu)
        gpus = _ok(c.get("/api/v1/label/gpu/values", params={"match[]": "gpu_utilization_ratio", "start": START, "end": END}))
        assert gpus == ["0", "1", "2", "3"]
        # label_values(model)
        assert _ok(c.get("/api/v1/label/model/values", params={"start": START, "end": END})) == ["llama"]
        # metrics(gpu_.*)
        names = _ok(c.get("/api/v1/label/__name__/values", params={"start": START, "end": END}))
        assert isinstance(names, list) and "gpu_utilization_ratio" in names
        # label_values(host) narrowed by a selector on a range that holds no samples of it
        empty = _ok(c.get("/api/v1/label/host/values",
                          params={"match[]": "gpu_utilization_ratio", "start": str(T0 // 1000 - 7200), "end": str(T0 // 1000 - 3600)}))
        assert empty == []
        # query_result(...)
        _ok(c.post("/api/v1/query", data={"query": "topk(2, gpu_utilization_ratio)", "time": END}))


def test_explore_metrics_browser_and_code_editor(grafana_view: str) -> None:
    with httpx.Client(base_url=grafana_view) as c:
        labels = _ok(c.get("/api/v1/labels", params={"start": START, "end": END}))
        assert isinstance(labels, list) and {"__name__", "gpu", "host", "model"} <= set(labels)
        narrowed = _ok(c.post("/api/v1/labels", data={"match[]": 'inference_generation_tokens_total', "start": START, "end": END}))
        assert narrowed == ["__name__", "instance", "job", "model"]
        series = _ok(c.post("/api/v1/series", data={"match[]": 'gpu_utilization_ratio{gpu="2"}', "start": START, "end": END}))
        assert series == [{"__name__": "gpu_utilization_ratio", "gpu": "2", "gpu_model": "NVIDIA H100 80GB HBM3",
                           "host": "node-a", "job": "dcgm"}]
        meta = _ok(c.get("/api/v1/metadata"))
        assert isinstance(meta, dict) and meta["gpu_utilization_ratio"][0]["type"] == "gauge"
        assert _ok(c.post("/api/v1/query_exemplars", data={"query": "gpu_utilization_ratio", "start": START, "end": END})) == []
        formatted = _ok(c.post("/api/v1/format_query", data={"query": "sum(rate(x[5m]))by(job)"}))
        assert formatted == "sum by (job) (rate(x[5m]))"
        rules = _ok(c.get("/api/v1/rules", params={"type": "alert"}))
        assert isinstance(rules, dict)
        kinds = {r["type"] for g in rules["groups"] for r in g["rules"]}
        assert kinds == {"alerting"} and all({"query", "health", "state", "alerts"} <= r.keys()
                                             for g in rules["groups"] for r in g["rules"])
        recording = _ok(c.get("/api/v1/rules", params={"type": "record"}))
        assert isinstance(recording, dict)
        recorded = [r for g in recording["groups"] for r in g["rules"]]
        assert {r["type"] for r in recorded} == {"recording"}  # the MoE figures of the default pack
        assert "moe:layer_max_over_mean:rate10m" in {r["name"] for r in recorded}
        alerts = _ok(c.get("/api/v1/alerts"))
        assert isinstance(alerts, dict) and isinstance(alerts["alerts"], list)
        runtime = _ok(c.get("/api/v1/status/runtimeinfo"))
        assert isinstance(runtime, dict) and runtime["seriesCount"] == 5
        assert runtime["startTime"] == "2027-01-15T09:00:00Z"  # the runtime's clock at start


def test_bad_input_in_prometheus_error_shape(grafana_view: str) -> None:
    with httpx.Client(base_url=grafana_view) as c:
        bad = c.post("/api/v1/query", data={"query": "sum(rate(x[5m])", "time": END})
        assert bad.status_code == 400
        assert bad.json() == {"status": "error", "errorType": "bad_data",
                              "error": "invalid parameter \"query\": 1:16: parse error: expected ')', found the end of the expression"}
        huge = c.post("/api/v1/query_range", data={"query": "up", "start": "0", "end": END, "step": "1"})
        assert huge.status_code == 400 and "11,000 points per timeseries" in huge.json()["error"]
        dup = c.post("/api/v1/query", data={"query": 'label_replace(gpu_utilization_ratio, "gpu", "", "gpu", ".*")', "time": END})
        assert dup.status_code == 422 and dup.json()["errorType"] == "execution"
        # a subquery at 1 s over 6 h: more than a millisecond of work however fast the engine
        slow = c.post("/api/v1/query_range", data={"query": "max_over_time(gpu_utilization_ratio[6h:1s])",
                                                   "start": START, "end": END, "step": "15", "timeout": "1ms"})
        assert slow.status_code == 503 and slow.json()["errorType"] == "timeout"
        no_match = c.get("/api/v1/series")
        assert no_match.status_code == 400 and no_match.json()["error"] == "no match[] parameter provided"
