"""Stored forecasts round-trip through real SQLite and PostgreSQL databases."""

from __future__ import annotations

import math

import numpy as np
from sqlalchemy import create_engine

from forecast.ids import HOUR_MS, SeriesId
from forecast.record import StoredForecast
from forecast.repository import ForecastRepository

T0 = 1_800_000_000_000


def record(series: str, generated: int, value: float, horizon: int = 4) -> StoredForecast:
    mean = np.full(horizon, value)
    mean[1] = np.nan  # undefined hour (e.g. a ratio with zero tokens)
    return StoredForecast(
        series=SeriesId.parse(series),
        generated_at_ms=generated,
        start_ms=generated - generated % HOUR_MS,
        mean=mean,
        lo80=mean - 1,
        hi80=mean + 1,
        lo95=mean - 2,
        hi95=np.full(horizon, np.nan),
        model="ets_AAdA24[log]",
        backtest_wape=0.12,
        backtest_mase=float("nan"),
        backtest_coverage80=None,
        flags=("gaps_filled",),
        warnings=("fit: ConvergenceWarning: gave up",),
        details={"candidates": {"naive": {"wape": 0.5, "mase": float("inf")}}, "rho": np.float64(0.5)},
        history_points=1000,
    )


def test_round_trip_latest_and_prune(store_url: str) -> None:
    engine = create_engine(store_url)
    repo = ForecastRepository(engine)
    try:
        first = record("spend:fleet", T0, 10.0)
        ids = repo.save_all([first, record("tokens:model=llama-3-70b", T0, 5e6)])
        assert len(ids) == 2
        got = repo.latest(SeriesId.parse("spend:fleet"))
        assert got is not None and got.id == ids[0]
        assert got.series == first.series and got.model == first.model
        assert got.generated_at_ms == T0 and got.start_ms == first.start_ms and got.step_ms == HOUR_MS
        np.testing.assert_array_equal(got.mean, first.mean)  # NaN survives as NULL -> NaN
        np.testing.assert_array_equal(got.hi95, first.hi95)
        assert got.backtest_wape == 0.12 and got.backtest_mase is None and got.backtest_coverage80 is None
        assert got.flags == ("gaps_filled",) and got.warnings == first.warnings
        assert got.details == {"candidates": {"naive": {"wape": 0.5, "mase": None}}, "rho": 0.5}
        assert got.history_points == 1000

        later = record("spend:fleet", T0 + HOUR_MS, 11.0)
        repo.save_all([later])
        latest = repo.latest_many()
        assert [str(f.series) for f in latest] == ["spend:fleet", "tokens:model=llama-3-70b"]
        assert latest[0].mean[0] == 11.0
        assert [f.series.scope for f in repo.latest_many([SeriesId.parse("tokens:model=llama-3-70b")])] == [
            "model=llama-3-70b"
        ]
        assert repo.latest(SeriesId.parse("cost_per_mtok:fleet")) is None

        # only superseded runs older than the cutoff go; each series keeps its latest
        assert repo.prune(T0 + 2 * HOUR_MS) == 1
        assert repo.count_runs() == 2
        assert repo.latest(SeriesId.parse("tokens:model=llama-3-70b")) is not None
        assert math.isnan(repo.latest(SeriesId.parse("spend:fleet")).mean[1])  # type: ignore[union-attr]
    finally:
        engine.dispose()
