"""The real service with the dashboard mounted, on a loopback port, over a store seeded with a
synthetic fleet (two phases: seed with a runtime whose loops never start, then serve the same
database with a fresh runtime, so background loops cannot race the seeding)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI

from alerts.notify.matchers import Matcher
from alerts.notify.silences import SilenceSpec
from cost.prices import CostSettings
from infermeter.api import create_app
from infermeter.runtime import Runtime, build_runtime
from infermeter.settings import AlertSettings, GpuSettings, ServerSettings, Settings, StoreSettings
from store import ManualClock
from store.types import SampleBatch
from tests.dashboard.synthetic import FleetShape, SyntheticFleet, model_of
from tests.service import run_app

HOUR_MS = 3_600_000
MINUTE_MS = 60_000
EXTRA_RULES = """
groups:
  - name: dashboard-test
    rules:
      - alert: GpuWarmForAnHour
        expr: gpu_temperature_celsius > 80
        for: 1h
        labels: {severity: info}
        annotations: {summary: "GPU {{ $labels.gpu }} on {{ $labels.host }} is warm", runbook: "Check the airflow."}
"""


def cost_settings() -> CostSettings:
    return CostSettings.model_validate({
        "gpu_prices": [
            {"gpu_model": "*", "dollars_per_gpu_hour": 2.0},
            {"gpu_model": "H100", "dollars_per_gpu_hour": 3.5, "effective_from": "2026-01-01T00:00:00Z"},
            {"gpu_model": "H100", "purchase_class": "spot", "dollars_per_gpu_hour": 1.6},
        ],
        "electricity": [{"dollars_per_kwh": 0.12, "pue": 1.3}],
        "overhead": [{"dollars_per_node_hour": 0.5}],
        "budgets": [
            {"scope": "fleet", "spend_per_period": 2500.0, "period": "month", "cost_per_million_tokens": 9.0},
            {"scope": "model", "model": "qwen2-7b", "cost_per_million_tokens": 6.0},
        ],
    })


def make_settings(tmp: Path, token: str | None = None) -> tuple[Settings, str]:
    (tmp / "rules.yml").write_text(EXTRA_RULES)
    config = tmp / "infermeter.yaml"
    config.write_text("")
    settings = Settings(
        server=ServerSettings(api_token=token, open_reads=False),
        store=StoreSettings(url=f"sqlite:///{tmp / 'dashboard.db'}"),
        gpu=GpuSettings(nvml="off"),
        alerts=AlertSettings(rule_files=["rules.yml"]),
        cost=cost_settings(),
        # No embedded reference worker: these tests and the benchmark bring their own data.
        **({"worker": {"embedded": False}} if "worker" in Settings.model_fields else {}),
    )
    return settings, str(config)


@dataclass(frozen=True)
class Seeded:
    fleet: SyntheticFleet
    end_ms: int
    samples: int
    seconds: float


def seed(settings: Settings, config_path: str, end_ms: int, hours: float, shape: FleetShape | None = None,
         live_every_ms: int = 5 * MINUTE_MS, alerts: bool = True, log: Callable[[str], None] | None = None,
         settle: Callable[[Runtime], None] | None = None) -> Seeded:
    """Fill the store: the fleet's series, the cost ledger's hours, the live cost series every
    ``live_every_ms``, alert states (firing, pending, resolved) and one silence. On the remote
    backend ``settle`` waits until what was written is queryable in the engine."""
    started = time.perf_counter()
    fleet = SyntheticFleet(shape or FleetShape(), end_ms - int(hours * HOUR_MS), end_ms)
    clock = ManualClock(fleet.start_ms)
    runtime = build_runtime(settings, clock, config_path=config_path)
    runtime.store.open()
    try:
        ids = runtime.tsdb.resolve(fleet.keys) if runtime.tsdb is not None else None
        for batch in fleet.batches():
            clock.set(int(batch.ts_ms[-1]))
            runtime.store.append(SampleBatch(batch.keys, batch.key_index, batch.ts_ms, batch.values, ids))
        clock.set(end_ms)
        if settle is not None:
            settle(runtime)
        say = log or (lambda _text: None)
        say(f"  {fleet.samples:,} samples stored in {time.perf_counter() - started:.0f} s")
        assert runtime.alerting is not None and runtime.notifier is not None
        ledger = runtime.alerting.ledger
        ledger.recompute(fleet.start_ms, end_ms)
        say(f"  cost ledger priced by {time.perf_counter() - started:.0f} s")
        first = fleet.start_ms - fleet.start_ms % MINUTE_MS + HOUR_MS
        for minute in range(first, end_ms + 1, live_every_ms):
            live = ledger.live_series(minute)
            if live:
                runtime.store.append(SampleBatch.from_samples(live))
        if settle is not None:
            settle(runtime)
        say(f"  live cost series written by {time.perf_counter() - started:.0f} s")
        if alerts:
            for at in (end_ms - 12 * MINUTE_MS, end_ms):
                runtime.alerting.rules.evaluate_all(at)
            runtime.notifier.silences.upsert(SilenceSpec(
                matchers=(Matcher("alertname", "=", "GpuTemperatureHigh"),), starts_at_ms=end_ms - HOUR_MS,
                ends_at_ms=end_ms + 2 * HOUR_MS, created_by="dashboard-test", comment="fan replacement planned",
            ))
        # A deploy half way through: drawn on the time charts, compared on the Releases page.
        runtime.markers.add("deploy", model=model_of(fleet.shape, 0), version="v2", message="new weights",
                            at_ms=end_ms - int(hours * HOUR_MS) // 2, actor="dashboard-test")
        if runtime.tsdb is not None:
            runtime.tsdb.checkpoint(force=True)
    finally:
        runtime.store.close(flush=True)
        runtime.engine.dispose()
    return Seeded(fleet, end_ms, fleet.samples, time.perf_counter() - started)


@contextmanager
def serve_dashboard(
    settings: Settings, clock: ManualClock, config_path: str, forecast: object = None
) -> Iterator[tuple[str, Runtime, FastAPI]]:
    """``create_app`` + ``dashboard.mount`` under uvicorn on a loopback port; ``forecast`` is
    set as the runtime's ``forecast`` attribute (what the forecast panels read)."""
    runtime = build_runtime(settings, clock, config_path=config_path)
    if forecast is not None:
        runtime.forecast = forecast  # type: ignore[assignment]
    app = create_app(runtime)  # mounts the dashboard (settings.dashboard.enabled)
    with run_app(app) as base:
        yield base, runtime, app


__all__ = ["make_settings", "seed", "serve_dashboard", "Seeded", "cost_settings"]
