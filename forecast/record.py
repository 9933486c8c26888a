"""A forecast placed in time: what is stored, served and plotted (no database knowledge here)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from forecast.ids import HOUR_MS, SeriesId
from forecast.types import F64


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def _num(v: float) -> float | None:
    return None if not math.isfinite(v) else float(v)


@dataclass(frozen=True)
class StoredForecast:
    """Hour ``i`` of the forecast covers ``[start_ms + i*step_ms, start_ms + (i+1)*step_ms)``;
    values are per hour (``$/h``, ``tokens/h``) or per 1M tokens for ``cost_per_mtok``.

    ``start_ms`` is the end of the last complete hour of history: the first hour forecast is
    the one in progress at ``generated_at_ms``.
    """

    series: SeriesId
    generated_at_ms: int
    start_ms: int
    mean: F64
    lo80: F64
    hi80: F64
    lo95: F64
    hi95: F64
    model: str
    backtest_wape: float | None = None
    backtest_mase: float | None = None
    # Out of sample: the share of backtest actuals inside the served 80 % / 95 % intervals, each
    # backtest origin checked against intervals built without it (forecast.conformal).
    backtest_coverage80: float | None = None
    backtest_coverage95: float | None = None
    flags: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    history_points: int = 0
    step_ms: int = HOUR_MS
    id: int | None = None

    @property
    def horizon(self) -> int:
        return int(self.mean.shape[0])

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.horizon * self.step_ms

    def times_ms(self) -> list[int]:
        return [self.start_ms + i * self.step_ms for i in range(self.horizon)]

    def truncated(self, steps: int) -> StoredForecast:
        k = max(0, min(steps, self.horizon))
        return replace(
            self,
            mean=self.mean[:k],
            lo80=self.lo80[:k],
            hi80=self.hi80[:k],
            lo95=self.lo95[:k],
            hi95=self.hi95[:k],
        )

    def to_json(self) -> dict[str, Any]:
        points = [
            {
                "time": iso(t),
                "ts_ms": t,
                "mean": _num(m),
                "lo80": _num(a),
                "hi80": _num(b),
                "lo95": _num(c),
                "hi95": _num(d),
            }
            for t, m, a, b, c, d in zip(
                self.times_ms(),
                self.mean.tolist(),
                self.lo80.tolist(),
                self.hi80.tolist(),
                self.lo95.tolist(),
                self.hi95.tolist(),
            )
        ]
        return {
            "series": str(self.series),
            "quantity": self.series.quantity,
            "scope": self.series.scope,
            "unit": self.series.unit,
            "model": self.model,
            "generated_at": iso(self.generated_at_ms),
            "generated_at_ms": self.generated_at_ms,
            "start": iso(self.start_ms),
            "step_seconds": self.step_ms // 1000,
            "horizon_hours": self.horizon * self.step_ms // HOUR_MS,
            "backtest": {
                "wape": _opt(self.backtest_wape),
                "mase": _opt(self.backtest_mase),
                "coverage80": _opt(self.backtest_coverage80),
                "coverage95": _opt(self.backtest_coverage95),
            },
            "flags": list(self.flags),
            "warnings": list(self.warnings),
            "history_points": self.history_points,
            "details": self.details,
            "points": points,
        }


def _opt(v: float | None) -> float | None:
    return None if v is None else _num(v)


def nan_array(values: list[float | None]) -> F64:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
