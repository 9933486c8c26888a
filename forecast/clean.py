"""Turning a raw hourly series into something every model can fit, and scale transforms.

Cleaning (:func:`clean`) -- what real cost series throw at us:

* non-finite values and **negative values are treated as missing**: spend and token counts are
  increases of counters, so a negative hour can only come from a counter reset that was not
  corrected upstream; it is dropped (flag ``negative_dropped``) rather than forecast;
* **outages are missing data, not demand**: a run of at least ``OUTAGE_MIN`` zero hours where the
  same hours of every earlier season in view (up to a week of them) were busy -- above a tenth
  of the series' typical hour -- is a scrape or exporter outage, not a quiet spell; it is
  dropped (flag ``outage_dropped``). Idle nights stay: they were zero the day before too;
* **a partial outage is missing data too** (:func:`dropouts`): a run of at least ``OUTAGE_MIN``
  hours each under half the *least* value of the same hour on every other day in view (up
  to a week before and a week after; busy, and with days on both sides) -- an exporter that
  reported a trickle for an afternoon. On six months of real hourly flight departures a morning
  of zeros followed by an afternoon at a tenth of the usual count was copied a week ahead by the
  weekly models (the forecast missed by twice the error of seasonal naive 24); flag
  ``dropout_dropped``. Needing days on *both* sides keeps a level drop in the last day (a tenant
  who left) and a business week's first weekend (low like the days after it, not before) as
  demand;
* leading missing hours are trimmed (the series did not exist yet);
* gaps are filled so that ETS and friends (which take no NaN) can run: short gaps (<= 2 steps)
  linearly, longer ones from the same hour one season earlier, else linearly; flag
  ``gaps_filled``. Backtests score only hours that were really observed (``observed`` mask).

Transforms (:class:`Transform`) -- ``log`` fits models to ``log(y + c)`` with ``c`` a small
fraction of the series' typical level, so zeros are allowed and the seasonal swing may scale
with the level. Quantiles map exactly through the monotone inverse ``exp(z) - c``; the point
forecast becomes the back-transformed centre, i.e. the *median* (the mean would need a variance
correction that grows with the horizon and is unstable on bursty series; the median is also
what absolute-error scores such as WAPE reward). Every result is clipped at zero, so a forecast
of spend or tokens is never negative.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from forecast.types import F64, FitError, Prediction

BoolArray = npt.NDArray[np.bool_]

SHORT_GAP = 2
OUTAGE_MIN = 3  # zero hours in a row before a run can count as an outage


@dataclass(frozen=True)
class Cleaned:
    y: F64  # finite, >= 0, gaps filled, leading gap trimmed
    observed: BoolArray  # True where ``y`` is a real observation
    flags: tuple[str, ...]
    trimmed: int  # leading steps dropped from the input

    @property
    def n(self) -> int:
        return int(self.y.shape[0])


def clean(raw: npt.ArrayLike, season: int = 24) -> Cleaned:
    y = np.array(raw, dtype=np.float64, copy=True).reshape(-1)
    flags: list[str] = []
    y[~np.isfinite(y)] = np.nan
    negative = y < 0
    if negative.any():
        flags.append("negative_dropped")
        y[negative] = np.nan
    outage = outages(y, season)
    if outage.any():
        flags.append("outage_dropped")
        y[outage] = np.nan
    dropout = dropouts(y, season)
    if dropout.any():
        flags.append("dropout_dropped")
        y[dropout] = np.nan
    valid = ~np.isnan(y)
    if not valid.any():
        return Cleaned(np.empty(0), np.zeros(0, dtype=np.bool_), (*flags, "no_data"), int(y.shape[0]))
    first = int(np.argmax(valid))
    y, valid = y[first:], valid[first:]
    if not valid.all():
        flags.append("gaps_filled")
        if not valid[-1]:
            flags.append("trailing_gap")
        y = fill_gaps(y, season)
    return Cleaned(y, valid, tuple(flags), first)


def outages(y: F64, season: int, lookback: int = 7) -> BoolArray:
    """Where ``y`` (NaN for unknown) holds zero runs that look like outages (module doc)."""
    out = np.zeros(y.shape[0], dtype=np.bool_)
    positive = y[np.isfinite(y) & (y > 0)]
    if season < 1 or positive.size == 0:
        return out
    busy = 0.1 * float(np.median(positive))
    for t, end in long_runs(np.isfinite(y) & (y == 0)):
        if t >= season:
            before = [y[k - j * season] for k in range(t, end) for j in range(1, lookback + 1) if k - j * season >= 0]
            seen = np.array([v for v in before if np.isfinite(v)])
            if seen.size and bool(np.all(seen > busy)):
                out[t:end] = True
    return out


def long_runs(mask: BoolArray, least: int = OUTAGE_MIN) -> list[tuple[int, int]]:
    """[start, end) of every run of True in ``mask`` at least ``least`` long."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return [(int(a), int(b)) for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)) if b - a >= least]


DROPOUT_SHARE = 0.5  # under this share of the least same-hour value of the days around


def dropouts(y: F64, season: int, lookback: int = 7) -> BoolArray:
    """Where ``y`` (NaN for unknown) holds partial outages (module doc): runs of at least
    ``OUTAGE_MIN`` steps, each under ``DROPOUT_SHARE`` of the least value at the same phase of the
    other seasons within ``lookback`` seasons either side, with at least one season on each side
    and every one of them busy."""
    n = y.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    positive = y[np.isfinite(y) & (y > 0)]
    if season < 1 or positive.size == 0 or n < 2 * season + 1:
        return out
    busy = 0.1 * float(np.median(positive))
    padded = np.concatenate([np.full(lookback * season, np.nan), y, np.full(lookback * season, np.nan)])
    centre = lookback * season

    def around(direction: int) -> F64:  # seasons on one side, one row per season back or ahead
        rows = [padded[centre + direction * j * season : centre + direction * j * season + n] for j in range(1, lookback + 1)]
        return np.asarray(rows, dtype=np.float64)

    before, after = around(-1), around(1)
    seen = np.isfinite(before).any(axis=0) & np.isfinite(after).any(axis=0)
    both = np.concatenate([before, after])
    least = np.where(seen, np.min(np.where(np.isfinite(both), both, np.inf), axis=0), 0.0)
    low = seen & np.isfinite(y) & (least > busy) & (np.nan_to_num(y, nan=np.inf) < DROPOUT_SHARE * least)
    for start, end in long_runs(low):
        out[start:end] = True
    return out


def regular(y: F64, season: int = 24) -> F64:
    """What every model's ``fit`` does first: NaN gaps filled (:func:`fill_gaps`), leading
    ones trimmed; a series with no value at all is refused."""
    y = np.asarray(y, dtype=np.float64)
    missing = ~np.isfinite(y)
    if not missing.any():
        return y
    if missing.all():
        raise FitError("no observed values")
    y = np.where(missing, np.nan, y)[int(np.argmax(~missing)) :]
    return fill_gaps(y, season)


def fill_gaps(y: F64, season: int) -> F64:
    """Fill NaN runs: short ones linearly, long ones from one season earlier (else linearly)."""
    out = y.copy()
    missing = np.isnan(out)
    idx = np.arange(out.shape[0])
    linear = np.interp(idx, idx[~missing], out[~missing])  # flat beyond the ends
    run_start = -1
    for t in range(out.shape[0] + 1):
        gap = t < out.shape[0] and missing[t]
        if gap and run_start < 0:
            run_start = t
        elif not gap and run_start >= 0:
            long_gap = t - run_start > SHORT_GAP
            for k in range(run_start, t):
                if long_gap and season > 0 and k >= season and not np.isnan(out[k - season]):
                    out[k] = out[k - season]
                else:
                    out[k] = linear[k]
            run_start = -1
    return out


@dataclass(frozen=True)
class Transform:
    kind: Literal["none", "log"] = "none"
    offset: float = 0.0

    @property
    def suffix(self) -> str:
        return "" if self.kind == "none" else f"[{self.kind}]"

    @staticmethod
    def log_for(y: F64, fraction: float = 0.05) -> Transform:
        """``log(y + c)`` with ``c = fraction x mean`` of the series (tiny floor for all-zero)."""
        level = float(np.mean(y)) if y.size else 0.0
        return Transform("log", max(fraction * level, 1e-9))

    def forward(self, y: F64) -> F64:
        if self.kind == "none":
            return y
        return np.log(np.maximum(y, 0.0) + self.offset)

    def inverse(self, z: F64) -> F64:
        if self.kind == "none":
            return z
        # Guard exp overflow on a runaway forecast: 700 ~ 1e304.
        return np.exp(np.minimum(z, 700.0)) - self.offset

    def inverse_prediction(self, p: Prediction) -> Prediction:
        """Back to the original scale and clipped at zero (quantiles map exactly)."""
        return Prediction(
            self.inverse(p.mean),
            {k: self.inverse(v) for k, v in p.lower.items()},
            {k: self.inverse(v) for k, v in p.upper.items()},
        ).clipped(0.0)
