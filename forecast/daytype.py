"""A day-type profile: each day ahead forecast by the average of the past days that looked like
the same weekday did a week ago -- hour-of-day x kind-of-day with the recent weeks, learnt from
the data rather than from a calendar.

Why: a week of history is enough to see that Saturdays differ from Tuesdays but not enough to
backtest a weekly model (its first forecast needs a week behind it). Seasonal naive 168 bets on
one noisy copy of last week; the daily models ignore the weekend. Here the days of the history
(24-step blocks counted back from its end, so each block lines up with the blocks ahead) are
compared by level and shape; the day ahead takes the mean profile of the days similar to its
own weekday in the past weeks. On a series with no weekly pattern every day is similar and this is
the seasonal mean of the last ``days`` days; on a business-week series the weekend days are
forecast from weekend days. "Similar" is within twice the median distance between consecutive
days, a noise yardstick that a weekday/weekend split hardly moves (five of six neighbours are
alike).
"""

from __future__ import annotations

import numpy as np

from forecast.baselines import Baseline, PathFit, rms, seasonal_residuals
from forecast.types import F64, Fitted


class DayTypeProfile(Baseline):
    def __init__(self, season: int = 24, week: int = 7, days: int = 21, recent: int = 5) -> None:
        self.season, self.week, self.days, self.recent = season, week, days, recent
        self.name = f"daytype{season}x{week}"
        self.min_length = season * week

    def fit(self, y: F64) -> Fitted:
        y = self._require(y)
        m, w = self.season, self.week
        k = min(self.days, y.shape[0] // m)
        raw = y[y.shape[0] - k * m :].reshape(k, m)
        # Each day relative to its week's level (weeks counted back from the end): a tenant who
        # moved in last week changes the level, not which days are alike or their shapes.
        week_of_day = (k - 1 - np.arange(k)) // w
        week_level = np.array([raw[week_of_day == i].mean() for i in range(int(week_of_day.max()) + 1)])
        scale = np.where(week_level > 0, week_level, 1.0)[week_of_day]
        blocks = raw / scale[:, None]
        level_now = float(scale[-1])
        distance = _distances(blocks)
        yardstick = float(np.median(np.diag(distance, 1))) if k > 1 else 0.0
        horizon_days = -(-self.max_h // m)
        rows = []
        for j in range(horizon_days):
            # This weekday in each past week; a day's distance to the kind is the median of its
            # distances to them, so one holiday among three weeks does not make a kind of its own.
            refs = np.arange(k - w + (j % w), -1, -w)
            similar = np.median(distance[refs], axis=0) <= 2.0 * yardstick + 1e-12
            if not similar.any():
                similar[refs[0]] = True
            # The most recent similar days only: a level shift two weeks ago is not averaged in.
            recent = np.nonzero(similar)[0][-self.recent :]
            rows.append(blocks[recent].mean(axis=0) * level_now)
        mean = np.concatenate(rows)[: self.max_h]
        resid = seasonal_residuals(y, m * w)
        return PathFit(mean, np.full(self.max_h, rms(resid)), resid)


def _distances(blocks: F64) -> F64:
    """Pairwise day distance: |log level ratio| plus the mean absolute difference of the
    level-normalised shapes."""
    level = blocks.mean(axis=1)
    safe = np.where(level > 0, level, 1.0)
    shape = blocks / safe[:, None]
    log_level = np.log(np.maximum(level, 1e-9 * max(float(level.max()), 1e-300)))
    d_level = np.abs(log_level[:, None] - log_level[None, :])
    d_shape = np.abs(shape[:, None, :] - shape[None, :, :]).mean(axis=2)
    return np.asarray(d_level + d_shape, dtype=np.float64)
