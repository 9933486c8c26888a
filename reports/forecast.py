"""From an hourly spend forecast to the report's "rest of the period" figure.

:func:`rest_of_period` sums an hourly path ($/h per step, with its 80 % band) over
``[from_ms, to_ms)``, counting the step in progress only for its overlapping part. It takes any
object with ``start_ms``, ``step_ms``, ``mean``, ``lo80``, ``hi80`` and ``model`` --
``forecast.record.StoredForecast`` has them -- so the composition root can wire the stored fleet
spend forecast as the report's :data:`reports.model.SpendForecast`:

    lambda lo, hi: rest_of_period(service.latest(SeriesId("spend")), lo, hi)

The band of a sum is taken as the sum of hourly bounds: exact when the hours' errors move
together (a level that is off stays off), conservative otherwise (as ``forecast.budget`` does).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import numpy.typing as npt

from reports.model import ForecastWindow


class HourlyPath(Protocol):
    @property
    def start_ms(self) -> int: ...

    @property
    def step_ms(self) -> int: ...

    @property
    def mean(self) -> npt.NDArray[np.float64]: ...

    @property
    def lo80(self) -> npt.NDArray[np.float64]: ...

    @property
    def hi80(self) -> npt.NDArray[np.float64]: ...

    @property
    def model(self) -> str: ...

    @property
    def backtest_coverage80(self) -> float | None: ...


def rest_of_period(path: HourlyPath | None, from_ms: int, to_ms: int) -> ForecastWindow | None:
    """Projected spend in ``[from_ms, to_ms)``, cut where the forecast ends; ``None`` when the
    forecast is missing, does not reach ``from_ms``, or has no finite value there."""
    if path is None or to_ms <= from_ms:
        return None
    total = {"mean": 0.0, "lo": 0.0, "hi": 0.0}
    band = True
    covered_until = from_ms
    used = 0
    for i, mean in enumerate(path.mean):
        lo_t = path.start_ms + i * path.step_ms
        hi_t = lo_t + path.step_ms
        overlap = min(hi_t, to_ms) - max(lo_t, from_ms)
        if overlap <= 0:
            if lo_t >= to_ms:
                break
            continue
        if not math.isfinite(float(mean)):
            break  # a hole ends the projection: what follows is not summed across it
        frac = overlap / path.step_ms
        total["mean"] += frac * float(mean)
        lo, hi = float(path.lo80[i]), float(path.hi80[i])
        if math.isfinite(lo) and math.isfinite(hi):
            total["lo"] += frac * lo
            total["hi"] += frac * hi
        else:
            band = False
        covered_until = min(hi_t, to_ms)
        used += 1
    if not used or path.start_ms > from_ms:
        return None
    return ForecastWindow(
        from_ms=from_ms, until_ms=covered_until, mean=max(0.0, total["mean"]),
        low=max(0.0, total["lo"]) if band else None, high=total["hi"] if band else None,
        level=80, source=path.model, coverage=path.backtest_coverage80,
    )
