"""Forecasts over the cost ledger: the hourly job, budget projections that the default rules turn
into alerts, and GET /api/v1/forecast on the running service."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from alerts.defaults import default_rule_groups
from alerts.schema import cost_ledger, usage_hourly
from cost.prices import Budget, CostSettings
from infermeter.runtime import Runtime
from infermeter.settings import AlertSettings, GpuSettings, Settings, StoreSettings
from store import ManualClock
from tests.alerts.rule_harness import first_firing
from tests.conftest import T0
from tests.service import serve

HOUR = 3_600_000
DAYS = 14


def _seed(engine: sa.Engine, start_ms: int) -> float:
    """Hourly spend 10 $/h ± 4 (daily cycle) for model m, 1M tokens/h; returns the total."""
    ledger, usage, total = [], [], 0.0
    for h in range(DAYS * 24):
        dollars = 10 + 4 * math.sin(2 * math.pi * h / 24)
        total += dollars
        common = {"hour_ms": start_ms + h * HOUR, "node": "n1", "model": "m", "tenant": ""}
        ledger.append({**common, "gpu": "0", "gpu_model": "H100", "purchase_class": "on_demand", "component": "gpu",
                       "dollars": dollars, "gpu_seconds": 3600.0, "energy_joules": 0.0})
        usage.append({**common, "prompt_tokens": 2e6, "generated_tokens": 1e6, "requests": 1000.0})
    with engine.begin() as conn:
        conn.execute(sa.insert(cost_ledger), ledger)
        conn.execute(sa.insert(usage_hourly), usage)
    return total


@pytest.fixture
def service(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, ManualClock, Runtime, float]]:
    # T0 is 2027-01-15T08:00Z: the seeded fortnight lies inside January, the budget's month
    clock = ManualClock(T0 + DAYS * 24 * HOUR + 10 * 60_000)
    cfg = tmp_path / "infermeter.yaml"
    cfg.write_text("")
    settings = Settings(
        store=StoreSettings(url=sqlite_url), gpu=GpuSettings(nvml="off"), alerts=AlertSettings(default_rules=False),
        # a placeholder budget; the test sets the real one once the seeded total is known
        cost=CostSettings.model_validate({"budgets": [{"scope": "fleet", "spend_per_period": 1.0}]}),
    )
    with serve(settings, clock, config_path=str(cfg)) as (base, runtime):
        total = _seed(runtime.engine, T0)
        yield base, clock, runtime, total


def test_budget_crossing_becomes_an_alert(service: tuple[str, ManualClock, Runtime, float]) -> None:
    base, clock, runtime, spent = service
    assert runtime.alerting is not None and runtime.alerting.forecasting is not None
    job = runtime.alerting.forecasting
    # spent so far + ~48 h at 10 $/h: the mean forecast crosses inside 72 h
    job.budgets = [Budget(scope="fleet", spend_per_period=spent + 480.0, cost_per_million_tokens=9.0)]
    job.run_once()
    spend = job.projections[("spend", "fleet")]
    assert spend.severity == "critical"  # the mean path crosses within 72 h
    hours = {s.series.get("bound"): s.value for s in job.samples(clock.now_ms()) if s.series.get("kind") == "spend"}
    assert 30 < hours["mean"] < 66 and hours["upper80"] <= hours["mean"]
    unit = job.projections[("unit_cost", "fleet")]
    assert unit.severity in ("warn", "critical")  # 10 $/h ± 4 over 1M tokens/h crosses 9 × 1.15 at the daily peaks
    # the gauges fire the default rule, severity by bound
    series = {s.series: (lambda t, v=s.value: v) for s in job.samples(clock.now_ms())}
    at, engine = first_firing(default_rule_groups(), "BudgetOverrunAhead", series, 2)
    assert at is not None
    fired = sorted(i.labels["severity"] for r, i in engine.active() if r.name == "BudgetOverrunAhead" and i.state == "firing")
    assert fired == ["critical", "warning"]
    # the forecast itself over HTTP
    reply = httpx.get(f"{base}/api/v1/forecast", params={"series": "spend:fleet", "horizon": "72h"})
    assert reply.status_code == 200, reply.text
    assert "spend:fleet" in reply.text and "hi80" in reply.text
    assert httpx.get(f"{base}/api/v1/forecast", params={"series": "bogus:fleet"}).status_code == 400
