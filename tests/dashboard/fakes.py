"""A forecast source for the dashboard's forecast panels (the real forecast service is wired
into the runtime separately; the panels only need :class:`dashboard.ForecastSource`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

HOUR_MS = 3_600_000
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Points:
    start_ms: int
    mean: F64
    lo80: F64
    hi80: F64
    lo95: F64
    hi95: F64
    generated_at_ms: int
    model: str = "holt-winters"
    step_ms: int = HOUR_MS
    backtest_coverage80: float | None = 0.81
    backtest_coverage95: float | None = 0.94


def flat_forecast(now_ms: int, level: float, spread: float, hours: int = 96) -> Points:
    start = now_ms - now_ms % HOUR_MS
    mean = np.full(hours, level)
    widen = np.sqrt(np.arange(1, hours + 1))
    return Points(start, mean, mean - spread * widen / 2, mean + spread * widen / 2, mean - spread * widen,
                  mean + spread * widen, now_ms)


@dataclass
class FakeForecasts:
    series: dict[str, Points] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def latest(self, series_id: str) -> Points | None:
        self.asked.append(series_id)
        return self.series.get(series_id)
