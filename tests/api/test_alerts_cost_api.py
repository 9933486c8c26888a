"""Alerts, rules, cost and budget endpoints over real HTTP, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cost.prices import CostSettings
from infermeter.runtime import Runtime
from infermeter.settings import AlertSettings, GpuSettings, ServerSettings, Settings, StoreSettings
from store import ManualClock
from store.types import Sample, SampleBatch, SeriesKey
from tests.conftest import T0
from tests.service import serve

RULES = """
groups:
  - name: custom
    rules:
      - alert: HotGpu
        expr: gpu_temperature_celsius > 80
        labels: {severity: critical}
        annotations: {summary: "{{ $labels.gpu }} is hot"}
      - alert: Broken
        expr: a / on(x) b
"""


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[tuple[str, ManualClock, Runtime]]:
    (tmp_path / "rules.yml").write_text(RULES)
    cfg = tmp_path / "infermeter.yaml"
    cfg.write_text("")
    settings = Settings(
        server=ServerSettings(api_token="tok", open_reads=True),
        store=StoreSettings(url=store_url),
        gpu=GpuSettings(nvml="off"),
        alerts=AlertSettings(rule_files=["rules.yml"]),
        cost=CostSettings.model_validate(
            {"gpu_prices": [{"gpu_model": "*", "dollars_per_gpu_hour": 3.0}], "overhead": [{"dollars_per_node_hour": 0.0}],
             "electricity": [{"dollars_per_kwh": 0.0}], "budgets": [{"scope": "fleet", "spend_per_period": 10.0}]}
        ),
    )
    clock = ManualClock(T0)
    with serve(settings, clock, config_path=str(cfg)) as (base, runtime):
        yield base, clock, runtime


def _feed(runtime: Runtime, clock: ManualClock, minutes: int) -> None:
    for step in range(minutes * 4 + 1):
        t = T0 + step * 15_000
        clock.set(t)
        batch = [
            Sample(SeriesKey.of("gpu_temperature_celsius", host="n1", gpu=str(g)), t, 70.0 + 15 * g) for g in range(2)
        ] + [Sample(SeriesKey.of("gpu_utilization_ratio", host="n1", gpu=str(g), gpu_model="L4"), t, 0.5) for g in range(2)]
        batch += [Sample(SeriesKey.of(n, x="1", y=y), t, 1.0) for n, y in (("a", "1"), ("a", "2"), ("b", ""))]
        runtime.store.append(SampleBatch.from_samples(batch))


def test_alerts_rules_and_history(service: tuple[str, ManualClock, Runtime]) -> None:
    base, clock, runtime = service
    _feed(runtime, clock, 2)
    assert runtime.alerting is not None
    runtime.alerting.rules.evaluate_all(clock.now_ms())
    alerts = httpx.get(f"{base}/api/v1/alerts").json()["data"]["alerts"]
    hot = [a for a in alerts if a["labels"]["alertname"] == "HotGpu"]
    assert [(a["labels"]["gpu"], a["state"], a["annotations"]["summary"]) for a in hot] == [("1", "firing", "1 is hot")]
    groups = {g["name"]: g for g in httpx.get(f"{base}/api/v1/rules").json()["data"]["groups"]}
    assert "infermeter-gpu" in groups  # the default pack rides along
    custom = {r["name"]: r for r in groups["custom"]["rules"]}
    assert custom["HotGpu"]["health"] == "ok" and custom["HotGpu"]["state"] == "firing"
    assert custom["Broken"]["health"] == "err" and "group_left" in custom["Broken"]["lastError"]
    assert custom["HotGpu"]["source"].endswith("rules.yml:5")
    history = httpx.get(f"{base}/api/v1/alerts/history", params={"since": "now-1h"}).json()["data"]
    assert any(h["rule"] == "custom/HotGpu" and h["to"] == "firing" for h in history)
    metrics = httpx.get(f"{base}/metrics").text
    assert 'infermeter_alerts{state="firing"}' in metrics


def test_cost_endpoints_and_recompute_auth(service: tuple[str, ManualClock, Runtime]) -> None:
    base, clock, runtime = service
    _feed(runtime, clock, 10)
    assert runtime.alerting is not None
    runtime.alerting.ledger.tick()
    data = httpx.get(f"{base}/api/v1/cost", params={"by": "gpu,component", "start": str(T0 / 1000)}).json()["data"]
    gpu_rows = [r for r in data["rows"] if r["component"] == "gpu"]
    # two GPUs, 10 observed minutes (the tick prices up to the last whole minute) at $3/h
    assert sum(r["dollars"] for r in gpu_rows) == pytest.approx(2 * 10 / 60 * 3.0, rel=0.02)
    per_gpu = httpx.get(f"{base}/api/v1/cost/per_token", params={"by": "gpu", "start": str(T0 / 1000)}).json()["data"]
    assert sorted(r["gpu"] for r in per_gpu["rows"]) == ["0", "1"]
    assert all(r["dollars"] > 0 for r in per_gpu["rows"])  # no tokens here: cost per token is None
    assert all(r["dollars_per_million_generated"] is None for r in per_gpu["rows"])
    budgets = httpx.get(f"{base}/api/v1/budgets").json()["data"]
    assert budgets[0]["spend_dollars"] == pytest.approx(data["total_dollars"], rel=1e-6)
    assert httpx.get(f"{base}/api/v1/cost", params={"by": "colour"}).status_code == 400
    assert "colour" in httpx.get(f"{base}/api/v1/cost", params={"by": "colour"}).text
    assert httpx.post(f"{base}/api/v1/cost/recompute", json={"since": "now-1h"}).status_code == 401
    bad = httpx.post(f"{base}/api/v1/cost/recompute", json={"sinse": "now-1h"}, headers={"Authorization": "Bearer tok"})
    assert bad.status_code == 422 and "since" in bad.text
    ok = httpx.post(f"{base}/api/v1/cost/recompute", json={"since": "now-1h"}, headers={"Authorization": "Bearer tok"})
    assert ok.status_code == 200 and ok.json()["data"]["hours"] >= 1
    assert httpx.get(f"{base}/api/v1/prices").json()["data"]["gpu_prices"][0]["dollars_per_gpu_hour"] == 3.0


def test_reads_closed_by_config(store_url: str) -> None:
    settings = Settings(server=ServerSettings(api_token="tok", open_reads=False), store=StoreSettings(url=store_url),
                        gpu=GpuSettings(nvml="off"))
    with serve(settings, ManualClock(T0)) as (base, _):
        assert httpx.get(f"{base}/api/v1/alerts").status_code == 401
        assert httpx.get(f"{base}/api/v1/alerts", headers={"Authorization": "Bearer tok"}).status_code == 200


def test_firing_rule_reaches_a_webhook_receiver_signed(store_url: str, tmp_path: Path) -> None:
    """Rule → engine → notifier → outbox → real HTTP receiver, HMAC verified (Standard Webhooks)."""
    import base64
    import hashlib
    import hmac
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from alerts.notify.config import NotifyConfig
    from store.clock import SystemClock

    secret = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
    received: list[tuple[dict[str, str], bytes]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (tmp_path / "rules.yml").write_text(RULES)
    cfg = tmp_path / "infermeter.yaml"
    cfg.write_text("")
    notify = NotifyConfig.model_validate({
        "route": {"receiver": "hook", "group_wait": "0s", "group_interval": "1s"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": f"http://127.0.0.1:{server.server_port}/hook",
                                                              "secret": f"whsec_{secret}"}]}],
        "delivery": {"poll_interval": "100ms"},
    })
    settings = Settings(store=StoreSettings(url=store_url), gpu=GpuSettings(nvml="off"), notify=notify,
                        alerts=AlertSettings(rule_files=["rules.yml"], default_rules=False))
    clock = SystemClock()
    try:
        with serve(settings, clock, config_path=str(cfg)) as (_, runtime):
            now = clock.now_ms()
            runtime.store.append(SampleBatch.from_samples(
                [Sample(SeriesKey.of("gpu_temperature_celsius", host="n1", gpu="7"), now, 91.0)]))
            assert runtime.alerting is not None
            runtime.alerting.rules.evaluate_all(now)
            import time

            deadline = time.monotonic() + 15
            while not received and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        server.shutdown()
    assert received, "the receiver got nothing"
    headers, body = received[0]
    payload = json.loads(body)
    assert payload["version"] == "4" and payload["status"] == "firing"
    assert payload["alerts"][0]["labels"]["alertname"] == "HotGpu" and payload["alerts"][0]["labels"]["gpu"] == "7"
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(base64.b64decode(secret), signed, hashlib.sha256).digest()).decode()
    assert f"v1,{expected}" in headers["webhook-signature"].split()
