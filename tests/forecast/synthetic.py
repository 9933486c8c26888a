"""Synthetic hourly series with known shape, and a HistorySource over them (no shared data)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from forecast.ids import HOUR_MS, SeriesId

F64 = npt.NDArray[np.float64]


def seasonal(
    n: int,
    *,
    level: float = 100.0,
    daily: float = 0.4,
    weekly: float = 0.0,
    trend_per_day: float = 0.0,
    noise: float = 0.05,
    seed: int = 0,
    phase: int = 0,
) -> F64:
    """``level x (1 + daily sin) x (1 - weekly on weekends) x (1 + trend) x lognormal noise``;
    hour 0 of the series is hour ``phase`` of a Monday."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64) + phase
    shape = 1.0 + daily * np.sin(2 * np.pi * (t - 6) / 24)
    weekend = ((t // 24) % 7) >= 5
    shape *= 1.0 - weekly * weekend
    trend = 1.0 + trend_per_day * (t - phase) / 24
    return np.asarray(level * shape * trend * np.exp(rng.normal(0.0, noise, n)), dtype=np.float64)


class SyntheticHistory:
    """Hourly values as a function of absolute hour index, so any window is consistent.

    ``spend`` = GPU-hours cost (flat-ish) + a share that follows load; ``tokens`` follow the
    load; both per scope, scaled by the scope name.
    """

    def __init__(self, origin_ms: int, *, seed: int = 7, fail: set[str] | None = None) -> None:
        self.origin_ms = origin_ms
        self.seed = seed
        self.fail = fail or set()
        self.calls: list[tuple[str, int, int]] = []

    def hourly(self, series: SeriesId, start_ms: int, end_ms: int) -> F64:
        self.calls.append((str(series), start_ms, end_ms))
        if str(series) in self.fail:
            raise ConnectionError("store unreachable")
        h0 = (start_ms - self.origin_ms) // HOUR_MS
        n = (end_ms - start_ms) // HOUR_MS
        total = h0 + n
        scale = 1.0 + (sum(map(ord, series.scope)) % 5)
        load = seasonal(max(total, 1), level=1000.0 * scale, daily=0.5, noise=0.08, seed=self.seed)[h0:total]
        if series.quantity == "tokens":
            return load * 3600.0
        cost = 2.0 * scale + 0.001 * load  # $ per hour: fixed GPU cost + a load-proportional part
        return np.asarray(cost, dtype=np.float64)
