"""The forecasting job over a synthetic HistorySource, a real SQLite database and a manual clock."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import create_engine

from forecast.ids import HOUR_MS, SeriesId
from forecast.service import ForecastService, ForecastUnavailable, ServiceConfig
from store.clock import ManualClock
from tests.forecast.synthetic import SyntheticHistory

T0 = 1_800_000_000_000
SERIES = [SeriesId.parse(s) for s in ("spend:fleet", "tokens:fleet", "cost_per_mtok:fleet", "spend:model=a")]
CONFIG = ServiceConfig(history_h=24 * 16)


def make(sqlite_url: str, **kw: object) -> tuple[ForecastService, ManualClock, SyntheticHistory]:
    clock = ManualClock(T0 + 20 * 60_000)  # 20 min into an hour
    history = SyntheticHistory(T0 - 30 * 24 * HOUR_MS, **kw)  # type: ignore[arg-type]
    return ForecastService(history, create_engine(sqlite_url), clock, SERIES, CONFIG), clock, history


def test_run_once_stores_consistent_forecasts(sqlite_url: str) -> None:
    service, _, history = make(sqlite_url)
    report = service.run_once()
    assert report.errors == {} and len(report.forecasts) == 4
    # history: the 16 days of complete hours before the current hour, read once per series
    assert ("spend:fleet", T0 - 16 * 24 * HOUR_MS, T0) in history.calls
    assert len(history.calls) == 3  # spend:fleet, tokens:fleet, spend:model=a
    by = {str(f.series): f for f in service.latest_many()}
    assert set(by) == {str(s) for s in SERIES}
    spend, tokens, cost = by["spend:fleet"], by["tokens:fleet"], by["cost_per_mtok:fleet"]
    for f in by.values():
        assert f.start_ms == T0 and f.generated_at_ms == T0 + 20 * 60_000 and f.horizon == 72
        assert (f.mean >= 0).all() and (f.lo80 <= f.hi80).all() and (f.lo95 <= f.lo80).all()
    np.testing.assert_allclose(cost.mean, spend.mean / tokens.mean * 1e6)  # the three agree
    assert (cost.lo80 <= cost.mean).all() and (cost.mean <= cost.hi80).all()
    assert cost.model.startswith("ratio(")
    assert cost.details["check"]["direct_model"] and cost.details["check"]["mean_rel_diff"] < 0.1
    assert cost.backtest_wape is not None and cost.backtest_wape < 0.2
    assert spend.backtest_wape is not None and "candidates" in spend.details


def test_history_failure_is_local(sqlite_url: str) -> None:
    service, _, _ = make(sqlite_url, fail={"tokens:fleet"})
    report = service.run_once()
    assert set(report.errors) == {"tokens:fleet", "cost_per_mtok:fleet"}
    assert "ConnectionError" in report.errors["tokens:fleet"]
    assert {str(f.series) for f in report.forecasts} == {"spend:fleet", "spend:model=a"}
    with pytest.raises(ForecastUnavailable):
        service.get_or_compute(SeriesId.parse("tokens:fleet"), 24)


def test_get_or_compute_serves_fresh_and_recomputes_stale(sqlite_url: str) -> None:
    service, clock, history = make(sqlite_url)
    sid = SeriesId.parse("spend:model=a")
    first = service.get_or_compute(sid, 24)
    assert first.horizon == 24 and len(history.calls) == 1
    clock.advance(30 * 60_000)
    again = service.get_or_compute(sid, 48)
    assert again.id == first.id and again.horizon == 48 and len(history.calls) == 1
    clock.advance(2 * HOUR_MS)
    fresh = service.get_or_compute(sid, 24)
    assert fresh.id != first.id and fresh.start_ms == T0 + 2 * HOUR_MS
    assert service.get_or_compute(sid, 24, refresh=True).id != fresh.id


def test_old_runs_are_pruned(sqlite_url: str) -> None:
    service, clock, _ = make(sqlite_url)
    one = [SeriesId.parse("spend:model=a")]
    service.run_once(one, horizon_h=6)
    clock.advance(8 * 24 * HOUR_MS)
    report = service.run_once(one, horizon_h=6)
    assert report.pruned == 1 and service.repository.count_runs() == 1


def test_bad_history_shape_is_reported(sqlite_url: str) -> None:
    class Short:
        def hourly(self, series: SeriesId, start_ms: int, end_ms: int) -> np.ndarray:
            return np.ones(5)

    clock = ManualClock(T0)
    service = ForecastService(Short(), create_engine(sqlite_url), clock, SERIES[:1], CONFIG)
    assert "shape" in service.run_once().errors["spend:fleet"]
    with pytest.raises(ValueError):
        service.run_once(horizon_h=1000)
