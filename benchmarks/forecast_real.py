"""The forecast benchmark's real series, on the protocol real services are judged by: rolling
origins every 24 h from hour 168 of a 14-day hourly series, 72 h ahead, against seasonal naive
24, seasonal naive 168 (where a week of history exists) and a 6 h linear trend
(``predict_linear``), with the achieved coverage of the 80 % and 95 % intervals.

Series (every real hourly series available on this machine):

* ``taylor_w0`` .. ``taylor_w5`` -- half-hourly electricity demand of England and Wales,
  5 June - 27 August 2000 (Taylor 2003, shipped in the ``pmdarima`` package as
  ``load_taylor``), summed to hours and cut into six 14-day windows: a real demand series with
  strong daily and weekly cycles (``make bench`` installs pmdarima);
* ``burstgpt_hourly`` -- BurstGPT week 1, 168 hourly token totals of a production LLM service
  (``../shared/data/traces``); only a week long, so its origins are hours 72 and 96 and seasonal
  naive 168 takes no part.

* every ``*.csv`` of ``--real-dir DIR`` (optional): one hourly series per file in a column named
  ``value`` (an empty cell is a missing hour), cut into consecutive 14-day windows (at most
  ``--real-windows`` per file), each on the same protocol. This is how real series that cannot
  ship with the project (licence unknown, or private to a user) take part; the output names
  each file's windows and prints their summary apart from the built-in series.

A series whose source is absent is skipped with a message. Targets: mean over series of the
method's WAPE / the better seasonal naive's <= 0.85, the worst series <= 1.1; the 80 % band's
coverage within 70-90 % and the 95 % band's within 90-98 % on every series.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._common import Target, section, skipped
from forecast.backtest import Accumulator, Score, seasonal_scale
from forecast.baselines import LinearTrend, SeasonalNaive
from forecast.clean import clean
from forecast.select import forecast_series
from forecast.types import F64, Prediction

HORIZON = 72
WINDOW = 14 * 24


@dataclass(frozen=True)
class RealSeries:
    name: str
    y: F64
    origins: tuple[int, ...]
    group: str = "built-in"  # where the series came from: built-in, a fetched data set, --real-dir


def real_series(burstgpt_hourly: F64 | None) -> list[RealSeries]:
    out: list[RealSeries] = []
    try:
        from pmdarima.datasets import load_taylor  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        print("skipping taylor: pmdarima is not installed (make bench installs it)")
    else:
        hourly = np.asarray(load_taylor(), dtype=np.float64).reshape(-1, 2).sum(axis=1)
        out += windows("taylor", hourly)
    if burstgpt_hourly is not None:
        out.append(RealSeries("burstgpt_hourly", burstgpt_hourly, (72, 96)))
    return out


DIR_GROUP = "--real-dir"


def windowed_origins() -> tuple[int, ...]:
    """The protocol's origins in a 14-day window: every 24 h from hour 168, 72 h ahead."""
    return tuple(range(168, WINDOW - HORIZON + 1, 24))


def windows(name: str, values: F64, group: str = "built-in", limit: int | None = None) -> list[RealSeries]:
    """``values`` cut into consecutive 14-day windows (at most ``limit``), named ``name_wI``."""
    count = values.shape[0] // WINDOW if limit is None else min(limit, values.shape[0] // WINDOW)
    return [
        RealSeries(f"{name}_w{i}", values[i * WINDOW : (i + 1) * WINDOW], windowed_origins(), group)
        for i in range(count)
    ]


class RealDirError(ValueError):
    """A file of ``--real-dir`` is not an hourly ``value`` column."""


def dir_series(directory: Path, max_windows: int) -> list[RealSeries]:
    """The 14-day windows of every ``*.csv`` in ``directory`` (see the module doc)."""
    out: list[RealSeries] = []
    paths = sorted(directory.glob("*.csv"))
    if not paths:
        print(f"--real-dir {directory}: no *.csv files")
    for path in paths:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None or "value" not in reader.fieldnames:
                raise RealDirError(f"{path}: needs a column named 'value', has {reader.fieldnames}")
            y = []
            for line, row in enumerate(reader, start=2):
                cell = (row["value"] or "").strip()
                try:
                    y.append(float(cell) if cell else float("nan"))
                except ValueError:
                    raise RealDirError(f"{path}, line {line}: value {cell!r} is not a number") from None
        values = np.asarray(y, dtype=np.float64)
        if values.shape[0] < WINDOW:
            print(f"skipping {path.name}: {values.shape[0]} hours, a window needs {WINDOW}")
        out += windows(path.stem, values, DIR_GROUP, max_windows)
    return out


@dataclass(frozen=True)
class SeriesResult:
    name: str
    method: Score
    snaive24: Score
    snaive168: Score | None
    linear6h: Score
    chosen: list[str]
    group: str = "built-in"

    @property
    def best_snaive(self) -> float:
        options = [self.snaive24.wape] + ([self.snaive168.wape] if self.snaive168 else [])
        return min(options)


Method = Callable[[F64], tuple[str, Prediction]]  # history -> (model name, HORIZON-step forecast)


def served(history: F64) -> tuple[str, Prediction]:
    """What the product forecasts from ``history``: :func:`forecast.select.forecast_series`."""
    result = forecast_series(history, HORIZON)
    return result.model, result.prediction


def evaluate(series: RealSeries, method: Method = served) -> SeriesResult:
    """``method`` and the baselines at each origin of ``series``, scored over all of them."""
    acc = {k: Accumulator() for k in ("method", "snaive24", "snaive168", "linear6h")}
    chosen: list[str] = []
    for o in series.origins:
        history, actual = series.y[:o], series.y[o : o + HORIZON]
        train = clean(history).y
        scale = seasonal_scale(train, 24)
        mask = np.isfinite(actual)
        actual = np.nan_to_num(actual)
        model, prediction = method(history)
        chosen.append(model)
        acc["method"].add(actual, prediction, mask, scale)
        acc["snaive24"].add(actual, SeasonalNaive(24).fit(train).predict(HORIZON).clipped(), mask, scale)
        if train.shape[0] >= 168:
            acc["snaive168"].add(actual, SeasonalNaive(168).fit(train).predict(HORIZON).clipped(), mask, scale)
        acc["linear6h"].add(actual, LinearTrend(6).fit(train).predict(HORIZON).clipped(), mask, scale)
    s168 = acc["snaive168"].score()
    return SeriesResult(
        series.name,
        acc["method"].score(),
        acc["snaive24"].score(),
        s168 if s168.points else None,
        acc["linear6h"].score(),
        chosen,
        series.group,
    )


def bench_real(burstgpt_hourly: F64 | None, extra: Sequence[RealSeries] = ()) -> list[str]:
    """``extra``: fetched data sets and --real-dir series, after the built-in ones."""
    section("accuracy: real hourly series (origins every 24 h, 72 h ahead)")
    results = [evaluate(s) for s in [*real_series(burstgpt_hourly), *extra]]
    if not results:
        why = "no real series available"
        return [skipped("real_mean_wape_vs_best_snaive", 0.85, False, why)]
    width = max(16, *(len(r.name) for r in results))
    print(
        f"{'series':{width}s} {'WAPE':>6s} {'MASE':>6s} {'sn24':>6s} {'sn168':>6s} {'lin6h':>6s} "
        f"{'/best sn':>8s} {'cov80':>6s} {'cov95':>6s}  chosen"
    )
    for r in results:
        sn168 = f"{r.snaive168.wape:6.3f}" if r.snaive168 else f"{'-':>6s}"
        print(
            f"{r.name:{width}s} {r.method.wape:6.3f} {r.method.mase:6.3f} {r.snaive24.wape:6.3f} {sn168} "
            f"{r.linear6h.wape:6.3f} {r.method.wape / r.best_snaive:8.2f} {r.method.coverage80:6.3f} "
            f"{r.method.coverage95:6.3f}  {', '.join(r.chosen)}"
        )
    ratios = [r.method.wape / r.best_snaive for r in results]
    groups = list(dict.fromkeys(r.group for r in results))
    for group in groups if len(groups) > 1 else []:
        part = [(r, x) for r, x in zip(results, ratios) if r.group == group]
        c80 = [100 * r.method.coverage80 for r, _ in part]
        c95 = [100 * r.method.coverage95 for r, _ in part]
        print(f"{group} series ({len(part)}): mean WAPE / better seasonal naive "
              f"{statistics.fmean(x for _, x in part):.2f}, worst {max(x for _, x in part):.2f}, beaten on "
              f"{sum(1 for _, x in part if x < 1.0)} of {len(part)}; coverage 80 % {min(c80):.1f}-{max(c80):.1f}, "
              f"95 % {min(c95):.1f}-{max(c95):.1f}")
    beaten = sum(1 for x in ratios if x < 1.0)
    print(f"beat the better seasonal naive on {beaten} of {len(results)} series; vs linear 6h on "
          f"{sum(1 for r in results if r.method.wape < r.linear6h.wape)} of {len(results)}")
    cov80 = [100 * r.method.coverage80 for r in results]  # in %: a 0.903 must not print as 0.90
    cov95 = [100 * r.method.coverage95 for r in results]
    return [
        Target("real_mean_wape_vs_best_snaive", statistics.fmean(ratios), 0.85, False).line(),
        Target("real_worst_wape_vs_best_snaive", max(ratios), 1.1, False).line(),
        Target("real_min_coverage80_pct", min(cov80), 70, True).line(),
        Target("real_max_coverage80_pct", max(cov80), 90, False).line(),
        Target("real_min_coverage95_pct", min(cov95), 90, True).line(),
        Target("real_max_coverage95_pct", max(cov95), 98, False).line(),
    ]

