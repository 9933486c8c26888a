"""A yardstick for the real-series accuracy targets: how far a forecast that *knows the future's
typical week* gets on the flight windows.

For each flight series, every hour of the week gets the median of that hour over all 26 weeks
of the records -- the windows' own futures included. That profile is then scored on exactly the
protocol of :mod:`benchmarks.forecast_real` (14-day windows, origins every 24 h from hour 168,
72 h ahead), as WAPE over the better of seasonal naive 24 / 168. It is not a bound (a level
shift inside a window can be followed from the history and the profile cannot follow it), but
it says how much of the error is the hour's own noise: on departures that repeat a timetable
every week, no forecast from 7 to 11 days of history should be expected to do much better.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from benchmarks.forecast_flights import hourly_flight_series
from benchmarks.forecast_real import HORIZON, WINDOW, RealSeries, evaluate, windowed_origins
from forecast.types import F64, Prediction

WEEK = 168


def known_week_profile(y: F64) -> F64:
    """Each hour of the week's median over every whole week of ``y`` (hour 0 = the first)."""
    weeks = y[: (y.shape[0] // WEEK) * WEEK].reshape(-1, WEEK)
    return np.asarray(np.median(weeks, axis=0), dtype=np.float64)


def window_ratio(y: F64, start: int, profile: F64) -> float:
    """The profile's WAPE over the better seasonal naive's on the window at ``start``, scored as
    :func:`benchmarks.forecast_real.evaluate` scores the served forecast."""

    def known_week(history: F64) -> tuple[str, Prediction]:
        hours = start + history.shape[0] + np.arange(HORIZON)
        return "known week", Prediction(profile[hours % WEEK], {}, {})

    result = evaluate(RealSeries("known week", y[start : start + WINDOW], windowed_origins()), known_week)
    return result.method.wape / result.best_snaive


def known_week_ratios(path: Path) -> dict[str, list[float]]:
    """Per flight series, the known-week profile's ratio on each of its windows."""
    out: dict[str, list[float]] = {}
    for name, y in hourly_flight_series(path).items():
        profile = known_week_profile(y)
        out[name] = [window_ratio(y, i * WINDOW, profile) for i in range(y.shape[0] // WINDOW)]
    return out


def print_known_week(path: Path) -> None:
    if not path.exists():
        return
    ratios = known_week_ratios(path)
    parts = ", ".join(f"{name.removeprefix('flights_')} {statistics.fmean(r):.2f}" for name, r in ratios.items())
    every = [x for r in ratios.values() for x in r]
    print(
        f"yardstick: the median week of all 26 weeks (knows the future) on the same flight windows: "
        f"mean {statistics.fmean(every):.2f} x the better seasonal naive ({parts})"
    )
