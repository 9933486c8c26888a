"""The forecaster wired to the cost ledger: hourly history from the ledger, an hourly job that
forecasts spend, tokens and cost per 1M tokens for the fleet and each model, and budget
projections turned into the gauges the default rules read
(``infermeter_forecast_budget_crossing_hours{kind, bound, scope[, model]}``).

The gauges are re-written every minute by the cost loop (``samples``), so they stay fresh for
the rules' 5-minute lookback between hourly runs.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from cost.ledger import HOUR_MS, CostLedger, period_start_ms
from cost.prices import Budget
from forecast.budget import BudgetProjection, UnitCostProjection, budget_projection, unit_cost_projection
from forecast.ids import QUANTITIES, SeriesId
from forecast.service import ForecastService
from ha.role import ALONE, Leadership
from store.clock import Clock
from store.types import Sample, SeriesKey

log = logging.getLogger(__name__)
CROSSING = "infermeter_forecast_budget_crossing_hours"


def scope_of(model: str | None) -> str:
    return f"model={model}" if model else "fleet"


class LedgerHistory:
    """`forecast.service.HistorySource` over the hourly cost ledger: NaN for hours never priced."""

    def __init__(self, ledger: CostLedger) -> None:
        self.ledger = ledger

    def hourly(self, series: SeriesId, start_ms: int, end_ms: int) -> npt.NDArray[np.float64]:
        model = None if series.scope == "fleet" else series.scope.removeprefix("model=")
        data = self.ledger.hourly_series(start_ms, end_ms, model)
        values = data["spend"] if series.quantity == "spend" else data["tokens"]
        hours = range(start_ms - start_ms % HOUR_MS, end_ms, HOUR_MS)
        return np.asarray([values.get(h, math.nan) for h in hours], np.float64)


def period_end_ms(at_ms: int, period: str) -> int:
    start = datetime.fromtimestamp(period_start_ms(at_ms, period) / 1000, UTC)
    if period == "day":
        return period_start_ms(at_ms, period) + 86_400_000
    if period == "week":
        return period_start_ms(at_ms, period) + 7 * 86_400_000
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return int(nxt.timestamp() * 1000)


@dataclass
class ForecastJob:
    service: ForecastService
    ledger: CostLedger
    budgets: list[Budget]
    clock: Clock
    unit_cost_tolerance: float = 0.15
    horizon_h: int = 72
    projections: dict[tuple[str, str], BudgetProjection | UnitCostProjection] = field(default_factory=dict)
    last_error: str = ""
    leadership: Leadership = ALONE
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def series(self) -> list[SeriesId]:
        """Fleet and every model priced in the last week, each as spend, tokens and cost per 1M."""
        now = self.clock.now_ms()
        models = sorted({str(r["model"]) for r in self.ledger.spend(now - 7 * 86_400_000, now + HOUR_MS, ["model"]) if r["model"]})
        scopes = ["fleet", *(scope_of(m) for m in models)]
        return [SeriesId(q, s) for s in scopes for q in QUANTITIES]

    def run_once(self) -> None:
        report = self.service.run_once(self.series(), self.horizon_h)
        for sid, reason in report.errors.items():
            log.info("forecast %s unavailable: %s", sid, reason)
        self.project()

    def project(self) -> None:
        now = self.clock.now_ms()
        out: dict[tuple[str, str], BudgetProjection | UnitCostProjection] = {}
        for budget in self.budgets:
            model = budget.model if budget.scope == "model" else None
            scope = scope_of(model)
            if budget.spend_per_period is not None:
                forecast = self.service.latest(SeriesId("spend", scope))
                if forecast is not None:
                    rows = self.ledger.spend(period_start_ms(now, budget.period), now + HOUR_MS, ["model"])
                    spent = sum(float(r["dollars"] or 0) for r in rows if model is None or r["model"] == model)
                    out[("spend", scope)] = budget_projection(
                        budget=budget.spend_per_period, spent=spent, now_ms=now, forecast=forecast,
                        period_end_ms=period_end_ms(now, budget.period), horizon_ms=self.horizon_h * HOUR_MS,
                    )
            if budget.cost_per_million_tokens is not None:
                forecast = self.service.latest(SeriesId("cost_per_mtok", scope))
                if forecast is not None:
                    out[("unit_cost", scope)] = unit_cost_projection(
                        budget_per_mtok=budget.cost_per_million_tokens, forecast=forecast, now_ms=now,
                        tolerance=self.unit_cost_tolerance, horizon_ms=self.horizon_h * HOUR_MS,
                    )
        with self._lock:
            self.projections = out

    def samples(self, at_ms: int) -> list[Sample]:
        """Hours until each projected crossing (mean and upper 80 %), for the budget rules."""
        with self._lock:
            projections = dict(self.projections)
        out = []
        for (kind, scope), proj in projections.items():
            labels = {"kind": kind, "scope": "fleet"} if scope == "fleet" else {"kind": kind, "scope": "model", "model": scope[6:]}
            if isinstance(proj, BudgetProjection):
                crossings = {"mean": proj.crossing_at_ms_mean, "upper80": proj.crossing_at_ms_upper}
            else:
                crossings = {"mean": proj.breach_at_ms_mean, "upper80": proj.breach_at_ms_upper}
            for bound, at in crossings.items():
                if at is not None:
                    hours = max(0.0, (at - at_ms) / HOUR_MS)
                    out.append(Sample(SeriesKey.of(CROSSING, {**labels, "bound": bound}), at_ms, hours))
        return out

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {f"{kind}:{scope}": {"severity": p.severity, "message": p.message} for (kind, scope), p in self.projections.items()}

    # -- the hourly loop ---------------------------------------------------------------------
    def start(self, first_delay_s: float = 120.0) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(first_delay_s,), name="forecast", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self, first_delay_s: float) -> None:
        # First run soon after start (the ledger needs its first ticks), then two minutes past
        # each hour, when the hour just closed has been priced.
        if self._stop.wait(first_delay_s):
            return
        while not self._stop.is_set():
            try:
                if self.leadership.leading():  # an HA follower leaves it to the leader
                    self.run_once()
                self.last_error = ""
            except Exception as exc:  # a failed run is retried next hour; the loop lives on
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("forecast run failed")
            now = self.clock.now_ms()
            wake = now - now % HOUR_MS + HOUR_MS + 120_000
            if self._stop.wait(max(1.0, (wake - now) / 1000)):
                return


def build_forecasting(engine: Engine, ledger: CostLedger, budgets: list[Budget], clock: Clock, tolerance: float) -> ForecastJob:
    service = ForecastService(LedgerHistory(ledger), engine, clock)
    return ForecastJob(service, ledger, list(budgets), clock, unit_cost_tolerance=tolerance)
