"""A priced store for the reports: real samples through the real cost ledger into a real database,
earlier days of the month as ledger rows, and alert history written by the alert state store.

Period 2027-01 (T0 = 2027-01-15 08:00 UTC). Two hours are priced from samples:
  n1 GPU 0 busy (80 %), H100 on demand at $4/h, $6/h from T0+30 min; n1 GPU 1 idle (0 %);
  n2 GPU 0 busy (50 %), H100 spot at $1.5/h; 300 W / 60 W / 300 W; $0.10/kWh x PUE 1.5;
  $1 per node-hour of overhead. n1 serves llama for tenants acme (60 tok/s) and globex (40 tok/s);
  n2 serves qwen (50 tok/s, no tenant).
Days 1..14 each add one ledger hour (llama, n1, $10 busy GPU + $2 idle) with 100k generated tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from alerts.schema import cost_ledger, usage_hourly
from alerts.state import AlertInstance, Transition
from alerts.state_store import AlertStateStore
from cost.compute import CostCalculator
from cost.ledger import HOUR_MS, CostLedger
from cost.prices import CostSettings, PriceBook
from reports.anomalies import AlertHistoryAnomalies
from reports.model import ReportSources, SpendForecast
from store import ManualClock, StoreOptions, TimeSeriesStore, create_store_engine
from store.reader import Reader
from store.types import Sample, SampleBatch, SeriesKey
from tests.conftest import T0

H100 = "NVIDIA H100 80GB HBM3"
STEP = 15_000
WARMUP = 5 * 60_000
DAY_MS = 86_400_000
JAN1 = int(datetime(2027, 1, 1, tzinfo=UTC).timestamp() * 1000)
NOW = T0 + 2 * HOUR_MS + 10 * 60_000  # 2027-01-15 10:10 UTC: the period is in progress
PRICED_HOURS = 2


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def cost_settings() -> CostSettings:
    return CostSettings.model_validate({
        "gpu_prices": [
            {"gpu_model": "H100", "purchase_class": "on_demand", "dollars_per_gpu_hour": 4.0},
            {"gpu_model": "H100", "purchase_class": "on_demand", "dollars_per_gpu_hour": 6.0,
             "effective_from": iso(T0 + 30 * 60_000)},
            {"gpu_model": "H100", "purchase_class": "spot", "dollars_per_gpu_hour": 1.5},
            {"gpu_model": "*", "purchase_class": "on_demand", "dollars_per_gpu_hour": 99.0,
             "effective_from": iso(JAN1 + 40 * DAY_MS)},  # only from February: not in the period
        ],
        "electricity": [{"dollars_per_kwh": 0.10, "pue": 1.5}],
        "overhead": [{"dollars_per_node_hour": 1.0}],
        "nodes": [{"host": "n2", "purchase_class": "spot"}],
        "budgets": [
            {"scope": "fleet", "cost_per_million_tokens": 20.0, "spend_per_period": 1000.0},
            {"scope": "model", "model": "llama", "spend_per_period": 100.0, "period": "week"},
        ],
    })


def _series() -> list[tuple[SeriesKey, float, float]]:
    out: list[tuple[SeriesKey, float, float]] = []
    for host, gpu, util, watts in (("n1", "0", 0.8, 300.0), ("n1", "1", 0.0, 60.0), ("n2", "0", 0.5, 300.0)):
        labels = {"host": host, "gpu": gpu, "uuid": f"GPU-{host}-{gpu}", "gpu_model": H100}
        out += [(SeriesKey.of("gpu_utilization_ratio", labels), util, 0.0),
                (SeriesKey.of("gpu_power_watts", labels), watts, 0.0),
                (SeriesKey.of("gpu_energy_joules_total", labels), 0.0, watts)]
    for model, instance, rate, tenant in (("llama", "n1:8000", 60.0, "acme"), ("llama", "n1:8000", 40.0, "globex"),
                                          ("qwen", "n2:8000", 50.0, None)):
        labels = {"model": model, "instance": instance, "job": "vllm", **({"tenant": tenant} if tenant else {})}
        out += [(SeriesKey.of("inference_generation_tokens_total", labels), 0.0, rate),
                (SeriesKey.of("inference_prompt_tokens_total", labels), 0.0, rate * 2),
                (SeriesKey.of("inference_requests_total", {**labels, "outcome": "success"}), 0.0, rate / 100)]
    return out


def _fill(store: TimeSeriesStore, clock: ManualClock, end_ms: int) -> None:
    series = _series()
    t = T0 - WARMUP
    while t <= end_ms:
        clock.set(t)
        batch = [Sample(key, t, gauge if rate == 0 else rate * (t - (T0 - WARMUP)) / 1000) for key, gauge, rate in series]
        store.append(SampleBatch.from_samples(batch))
        t += STEP


def _earlier_days(engine: sa.Engine) -> None:
    rows, usage = [], []
    for day in range(14):
        hour = JAN1 + day * DAY_MS + 12 * HOUR_MS
        base = {"hour_ms": hour, "node": "n1", "gpu": "0", "gpu_model": H100, "purchase_class": "on_demand",
                "model": "llama", "tenant": "", "energy_joules": 0.0}
        rows.append({**base, "component": "gpu", "dollars": 10.0, "gpu_seconds": 3600.0})
        rows.append({**base, "gpu": "1", "component": "idle", "dollars": 2.0, "gpu_seconds": 3600.0})
        usage.append({"hour_ms": hour, "model": "llama", "node": "n1", "tenant": "", "prompt_tokens": 200_000.0,
                      "generated_tokens": 100_000.0, "requests": 1_000.0})
    with engine.begin() as conn:
        conn.execute(sa.insert(cost_ledger), rows)
        conn.execute(sa.insert(usage_hourly), usage)


def _alert(labels: dict[str, str], annotations: dict[str, str], state: str, active: int, value: float,
           fired: int | None = None, resolved: int | None = None) -> AlertInstance:
    return AlertInstance(labels=labels, annotations=annotations, state=state, active_at_ms=active, value=value,
                         last_eval_ms=resolved or fired or active, fired_at_ms=fired, resolved_at_ms=resolved)


CHECKS = {
    "check_utilization": "fleet GPU utilization 43% over the last hour vs 71% over the 24 h before",
    "check_request_mix": "prompt tokens/request 200 vs 150 (+33%); generation tokens/request 100 vs 100 (+0%)",
    "check_autoscaling": "no scale recommendation on record for this scope",
}


def _alert_history(engine: sa.Engine) -> None:
    states = AlertStateStore(engine)
    spike = {"alertname": "CostPerTokenSpike", "severity": "warning", "scope": "model", "model": "llama"}
    spike_old = {"alertname": "CostPerTokenSpike", "severity": "warning", "scope": "model", "model": "qwen"}
    over = {"alertname": "TokenCostOverBudget", "severity": "critical", "scope": "fleet"}
    a = _alert(spike, {"summary": "model llama: cost per 1M tokens jumped to $42", **CHECKS}, "resolved",
               T0, 42.0, T0 + 20 * 60_000, T0 + 80 * 60_000)
    old = _alert(spike_old, {}, "firing", JAN1 + 2 * DAY_MS, 31.0, JAN1 + 2 * DAY_MS)
    december = _alert(spike, {}, "firing", JAN1 - DAY_MS, 99.0, JAN1 - DAY_MS)

    def tr(inst: AlertInstance, to: str, at: int) -> Transition:
        return Transition(inst.fingerprint, dict(inst.labels), "pending" if to == "firing" else "firing", to, at, inst.value)

    states.save("infermeter-cost/CostPerTokenSpike", {a.fingerprint: a}, [
        tr(december, "firing", JAN1 - DAY_MS),
        tr(old, "firing", JAN1 + 2 * DAY_MS),
        tr(a, "firing", T0 + 20 * 60_000),
        tr(a, "resolved", T0 + 80 * 60_000),
    ])
    b = _alert(over, {"summary": "fleet: $55 per 1M tokens is far over budget", **CHECKS}, "firing",
               T0 + 75 * 60_000, 55.0, T0 + 90 * 60_000)
    states.save("infermeter-cost/TokenCostOverBudget#2", {b.fingerprint: b}, [tr(b, "firing", T0 + 90 * 60_000)])
    idle = _alert({"alertname": "GpuIdle", "severity": "info", "gpu": "1", "host": "n1"}, {}, "firing", T0, 0.0, T0)
    states.save("infermeter-gpu/GpuIdle", {idle.fingerprint: idle}, [tr(idle, "firing", T0 + 30 * 60_000)])


@dataclass
class Seeded:
    url: str
    engine: sa.Engine
    ledger: CostLedger
    settings: CostSettings

    def sources(self, now_ms: int = NOW, forecast: SpendForecast | None = None) -> ReportSources:
        return ReportSources(self.ledger, self.settings, now_ms, AlertHistoryAnomalies(self.engine), forecast)


def seed(url: str) -> Iterator[Seeded]:
    clock = ManualClock(T0)
    engine = create_store_engine(url)
    store = TimeSeriesStore(engine, clock, StoreOptions())
    store.open()
    try:
        _fill(store, clock, T0 + PRICED_HOURS * HOUR_MS)
        settings = cost_settings()
        book = PriceBook(settings)
        ledger = CostLedger(engine, CostCalculator(Reader(store), book, "here"), book, clock)
        for h in range(PRICED_HOURS):
            ledger.reprice_hour(T0 + h * HOUR_MS)
        _earlier_days(engine)
        _alert_history(engine)
        clock.set(NOW)
        yield Seeded(url, engine, ledger, settings)
    finally:
        store.close(flush=False)
        engine.dispose()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    """SQLite, seeded once per module (the tests only read)."""
    from infermeter import db

    url = f"sqlite:///{tmp_path_factory.mktemp('reports') / 'store.db'}"
    engine = create_store_engine(url)
    db.upgrade(engine)
    engine.dispose()
    yield from seed(url)
