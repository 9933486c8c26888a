"""The forecasting job: read hourly history, forecast, store; read the latest back.

The service knows nothing of the store's internals: history comes through the one-method
:class:`HistorySource` protocol, results go to the ``forecast_*`` tables through an Engine,
time comes from a :class:`store.clock.Clock`. Failures are local: a series whose history
cannot be read is reported in :attr:`RunReport.errors` and the others are still forecast.

Times: a run at ``now`` uses the complete hours before ``end = floor(now to the hour)``
(``history_h`` of them) and forecasts ``horizon_h`` hours from ``end``; the first forecast
hour is the one in progress.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine

from forecast.ids import HOUR_MS, MAX_HORIZON_H, SeriesId
from forecast.ratio import check_against_direct, historical_ratio, ratio_prediction
from forecast.ratio_backtest import ratio_backtest
from forecast.record import StoredForecast
from forecast.repository import ForecastRepository
from forecast.select import SelectConfig, SeriesForecast, forecast_series
from forecast.types import F64, Prediction
from store.clock import Clock


class HistorySource(Protocol):
    def hourly(self, series: SeriesId, start_ms: int, end_ms: int) -> npt.NDArray[np.float64]:
        """One value per hour for the hours starting at ``start_ms, start_ms + 1 h, ...`` before
        ``end_ms`` (both hour-aligned): spend in $ or generated tokens during that hour; NaN
        where unknown. Only ``spend`` and ``tokens`` series are asked for."""
        ...


class ForecastUnavailable(Exception):
    """A forecast could not be made (its history could not be read)."""

    def __init__(self, series: SeriesId, reason: str) -> None:
        super().__init__(f"{series}: {reason}")
        self.series = series
        self.reason = reason


@dataclass(frozen=True)
class ServiceConfig:
    horizon_h: int = 72
    max_horizon_h: int = MAX_HORIZON_H
    history_h: int = 24 * 42  # the fit window (35 days) + room for the backtest origins
    select: SelectConfig = SelectConfig()
    retention_ms: int = 7 * 24 * HOUR_MS  # superseded runs older than this are pruned
    stale_after_ms: int = 2 * HOUR_MS  # on-demand reads recompute a forecast older than this
    draws: int = 2000  # simulation size for cost-per-token intervals
    seed: int = 0


@dataclass(frozen=True)
class RunReport:
    generated_at_ms: int
    forecasts: list[StoredForecast]
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    pruned: int = 0


class ForecastService:
    def __init__(
        self,
        history: HistorySource,
        engine: Engine,
        clock: Clock,
        series: Sequence[SeriesId] = (),
        config: ServiceConfig = ServiceConfig(),
    ) -> None:
        self.history = history
        self.clock = clock
        self.series = list(series)
        self.config = config
        self.repository = ForecastRepository(engine)

    # -- writing -----------------------------------------------------------------------------
    def run_once(self, series: Sequence[SeriesId] | None = None, horizon_h: int | None = None) -> RunReport:
        """Forecast ``series`` (default: the configured ones), store the results, prune old runs."""
        started = self.clock.monotonic()
        now = self.clock.now_ms()
        horizon = horizon_h or self.config.horizon_h
        if not 1 <= horizon <= self.config.max_horizon_h:
            raise ValueError(f"horizon {horizon} h is out of range 1..{self.config.max_horizon_h}")
        job = _Job(self, now, horizon)
        records: list[StoredForecast] = []
        errors: dict[str, str] = {}
        for sid in series if series is not None else self.series:
            try:
                records.append(job.ratio(sid) if sid.derived else job.plain(sid))
            except ForecastUnavailable as exc:
                errors[str(sid)] = exc.reason
        saved = self.repository.save_all(records)
        records = [replace(r, id=i) for r, i in zip(records, saved)]
        pruned = self.repository.prune(now - self.config.retention_ms)
        return RunReport(now, records, errors, self.clock.monotonic() - started, pruned)

    # -- reading -----------------------------------------------------------------------------
    def latest(self, series: SeriesId) -> StoredForecast | None:
        return self.repository.latest(series)

    def latest_many(self, series: Sequence[SeriesId] | None = None) -> list[StoredForecast]:
        return self.repository.latest_many(series)

    def get_or_compute(self, series: SeriesId, horizon_h: int, *, refresh: bool = False) -> StoredForecast:
        """The latest stored forecast if it is fresh and long enough, else a new one (stored).
        Raises :class:`ForecastUnavailable`."""
        found = None if refresh else self.repository.latest(series)
        fresh = found is not None and self.clock.now_ms() - found.generated_at_ms < self.config.stale_after_ms
        if found is not None and fresh and found.horizon >= horizon_h:
            return found.truncated(horizon_h)
        report = self.run_once([series], max(horizon_h, self.config.horizon_h))
        if str(series) in report.errors:
            raise ForecastUnavailable(series, report.errors[str(series)])
        return report.forecasts[0].truncated(horizon_h)


class _Job:
    """One run's work: history read once per series, spend/tokens forecasts shared with the
    cost-per-token ratio of the same scope (so the three agree)."""

    def __init__(self, service: ForecastService, now: int, horizon: int) -> None:
        self.s = service
        self.now = now
        self.horizon = horizon
        self.end = now - now % HOUR_MS
        self.start = self.end - service.config.history_h * HOUR_MS
        self._history: dict[SeriesId, F64] = {}
        self._fits: dict[SeriesId, SeriesForecast] = {}

    def history(self, sid: SeriesId) -> F64:
        if sid not in self._history:
            try:
                values = np.asarray(self.s.history.hourly(sid, self.start, self.end), dtype=np.float64)
            except Exception as exc:  # the source's failure is this series' failure only
                raise ForecastUnavailable(sid, f"history source failed: {type(exc).__name__}: {exc}") from exc
            expected = (self.end - self.start) // HOUR_MS
            if values.shape != (expected,):
                raise ForecastUnavailable(
                    sid, f"history source returned shape {values.shape}, expected ({expected},)"
                )
            self._history[sid] = values
        return self._history[sid]

    def fit(self, sid: SeriesId) -> SeriesForecast:
        if sid not in self._fits:
            self._fits[sid] = forecast_series(self.history(sid), self.horizon, self.s.config.select)
        return self._fits[sid]

    def record(self, sid: SeriesId, pred: Prediction, model: str, **kw: Any) -> StoredForecast:
        return StoredForecast(
            series=sid,
            generated_at_ms=self.now,
            start_ms=self.end,
            mean=pred.mean,
            lo80=pred.lower[80],
            hi80=pred.upper[80],
            lo95=pred.lower[95],
            hi95=pred.upper[95],
            model=model,
            **kw,
        )

    def plain(self, sid: SeriesId) -> StoredForecast:
        f = self.fit(sid)
        return self.record(
            sid,
            f.prediction,
            f.model,
            backtest_wape=f.backtest.wape if f.backtest else None,
            backtest_mase=f.backtest.mase if f.backtest else None,
            backtest_coverage80=f.coverage.get(80),
            backtest_coverage95=f.coverage.get(95),
            flags=f.flags,
            warnings=f.warnings,
            details=_details(f),
            history_points=f.observations,
        )

    def ratio(self, sid: SeriesId) -> StoredForecast:
        spend_id, tokens_id = sid.with_quantity("spend"), sid.with_quantity("tokens")
        spend, tokens = self.fit(spend_id), self.fit(tokens_id)
        rng = np.random.default_rng([self.s.config.seed, zlib.crc32(str(sid).encode())])
        history = historical_ratio(self.history(spend_id), self.history(tokens_id))
        bt = ratio_backtest(spend, tokens, history, self.s.config.select.season, rng, self.s.config.draws)
        pred, ratio_flags = ratio_prediction(
            spend.prediction, tokens.prediction, rho=bt.rho, rng=rng, draws=self.s.config.draws
        )
        direct = forecast_series(history, self.horizon, self.s.config.select)
        check = check_against_direct(pred, direct)
        flags = tuple(dict.fromkeys((*ratio_flags, *spend.flags, *tokens.flags)))
        details = {
            "method": "ratio of the spend and token forecasts; intervals simulated (Gaussian copula of their joint backtest errors)",
            "rho": bt.rho,
            "spend_model": spend.model,
            "tokens_model": tokens.model,
            "direct": {
                "model": direct.model,
                "backtest": direct.backtest.as_dict() if direct.backtest else None,
                "mean": direct.prediction.mean.tolist(),
                "flags": list(direct.flags),
            },
            "check": check.as_dict(),
        }
        return self.record(
            sid,
            pred,
            f"ratio({spend.model} / {tokens.model})",
            backtest_wape=bt.wape,
            backtest_mase=bt.mase,
            backtest_coverage80=bt.coverage.get(80),
            backtest_coverage95=bt.coverage.get(95),
            flags=flags,
            warnings=tuple(f"spend: {w}" for w in spend.warnings)
            + tuple(f"tokens: {w}" for w in tokens.warnings),
            details=details,
            history_points=int(np.isfinite(history).sum()),
        )


def _details(f: SeriesForecast) -> dict[str, Any]:
    return {
        "candidates": {name: s.as_dict() for name, s in f.scores.items()},
        "coverage": {str(k): v for k, v in f.coverage.items()},
    }
