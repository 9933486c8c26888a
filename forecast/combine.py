"""Forecast combination: on noisy, bursty series the average or median of a few good models
beats the single best one more often than not (the lesson of the M3/M4 competitions). The
selector offers the median and the mean of its top backtested models as candidates, scored on
the very same backtest forecasts (no extra fits). Intervals are not taken from here in the
end: :mod:`forecast.conformal` builds them from the chosen method's backtest errors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forecast.types import Prediction


def combine(preds: Sequence[Prediction], how: str = "mean") -> Prediction:
    """Average (``how="mean"``) or take the median (``"median"``) of the point forecasts and,
    level by level, of the interval bounds (quantile averaging)."""
    if not preds:
        raise ValueError("nothing to combine")
    if how not in ("mean", "median"):
        raise ValueError(f"unknown combination {how!r}: mean or median")
    f = np.mean if how == "mean" else np.median
    levels = preds[0].lower.keys()
    return Prediction(
        np.asarray(f([p.mean for p in preds], axis=0), dtype=np.float64),
        {lv: np.asarray(f([p.lower[lv] for p in preds], axis=0), dtype=np.float64) for lv in levels},
        {lv: np.asarray(f([p.upper[lv] for p in preds], axis=0), dtype=np.float64) for lv in levels},
    )
