"""How the cost-per-1M-tokens forecast (spend forecast / token forecast) did in the backtest.

The two series are backtested separately by :func:`forecast.select.forecast_series`; at the
origins both were tested on, their forecasts are paired. From the pairs come

* the **joint error correlation** ``rho`` -- of the two chosen methods' scaled backtest errors
  hour by hour (a busy hour that beat the token forecast usually beat the spend forecast too),
  which the ratio's simulated intervals use; the in-sample one-step residuals stand in when
  fewer than 24 paired errors exist;
* WAPE and MASE of the ratio of the two point forecasts against the observed hourly ratio;
* the **out-of-sample coverage** of the ratio's 80 % and 95 % intervals: at each paired origin
  the spend and token intervals are rebuilt from the other origins' errors
  (:mod:`forecast.conformal`), the ratio simulated from them with ``rho``, and the observed
  ratio checked against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from forecast.backtest import Accumulator, OriginForecast, seasonal_scale
from forecast.conformal import Errors, bands, origin_errors
from forecast.ratio import SCALE, ratio_prediction, residual_correlation
from forecast.select import SeriesForecast
from forecast.types import F64, LEVELS, Prediction

_MIN_PAIRED = 24


@dataclass(frozen=True)
class RatioBacktest:
    rho: float
    wape: float | None = None
    mase: float | None = None
    coverage: dict[int, float] = field(default_factory=dict)


def _pairs(spend: SeriesForecast, tokens: SeriesForecast) -> list[tuple[int, OriginForecast, OriginForecast]]:
    by_origin = {f.origin + spend.offset: f for f in spend.backtest_forecasts}
    out = []
    for t in tokens.backtest_forecasts:
        s = by_origin.get(t.origin + tokens.offset)
        if s is not None and s.pred.h == t.pred.h:
            out.append((t.origin + tokens.offset, s, t))
    return out


def joint_rho(
    errors_s: Sequence[Errors], errors_t: Sequence[Errors], spend: SeriesForecast, tokens: SeriesForecast
) -> float:
    """Correlation of the paired origins' scaled errors, hour by hour."""
    xs, ys = [], []
    for es, et in zip(errors_s, errors_t):
        common, i, j = np.intersect1d(es.steps, et.steps, return_indices=True)
        if common.size:
            xs.append(es.scaled[i])
            ys.append(et.scaled[j])
    x = np.concatenate(xs) if xs else np.empty(0)
    y = np.concatenate(ys) if ys else np.empty(0)
    if x.shape[0] >= _MIN_PAIRED and np.std(x) > 0 and np.std(y) > 0:
        return float(np.clip(np.corrcoef(x, y)[0, 1], -0.99, 0.99))
    return residual_correlation(spend.residuals, tokens.residuals)


def ratio_backtest(
    spend: SeriesForecast,
    tokens: SeriesForecast,
    ratio: F64,
    season: int,
    rng: np.random.Generator,
    draws: int,
) -> RatioBacktest:
    pairs = _pairs(spend, tokens)
    # Scaled as the served bands were (the same floor), so the coverage is theirs.
    errors_s = [origin_errors(s, spend.error_floor) for _, s, _ in pairs]
    errors_t = [origin_errors(t, tokens.error_floor) for _, _, t in pairs]
    rho = joint_rho(errors_s, errors_t, spend, tokens)
    acc = Accumulator()
    inside = {lv: 0 for lv in LEVELS}
    checked = 0
    for k, (o, s, t) in enumerate(pairs):
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(t.pred.mean > 0, s.pred.mean / t.pred.mean * SCALE, np.nan)
        actual = ratio[o : o + mean.shape[0]]
        mask = np.isfinite(actual) & np.isfinite(mean)
        train = ratio[:o][np.isfinite(ratio[:o])]
        acc.add(
            np.nan_to_num(actual),
            Prediction(np.nan_to_num(mean), {}, {}),
            mask,
            seasonal_scale(train, season),
        )
        bs = bands(errors_s[:k] + errors_s[k + 1 :], s.pred.h, LEVELS)
        bt = bands(errors_t[:k] + errors_t[k + 1 :], t.pred.h, LEVELS)
        if bs is None or bt is None or not mask.any():
            continue
        pred, _ = ratio_prediction(
            bs.apply(s.pred.mean, spend.error_floor), bt.apply(t.pred.mean, tokens.error_floor),
            rho=rho, rng=rng, draws=draws
        )
        for lv in LEVELS:
            lo = np.where(np.isfinite(pred.lower[lv]), pred.lower[lv], -np.inf)
            hi = np.where(np.isfinite(pred.upper[lv]), pred.upper[lv], np.inf)
            inside[lv] += int(((actual >= lo) & (actual <= hi))[mask].sum())
        checked += int(mask.sum())
    score = acc.score()
    coverage = {lv: inside[lv] / checked for lv in LEVELS} if checked else {}
    if score.points == 0:
        return RatioBacktest(rho, coverage=coverage)
    return RatioBacktest(rho, score.wape, score.mase, coverage)
