"""Value types and the two protocols every model implements.

``Forecaster.fit(y) -> Fitted`` and ``Fitted.predict(h, levels) -> Prediction`` (the shape
statsforecast gives every model). ``y`` is a regular series, one value per step (an hour for
the service); NaN marks a gap, which every model fills first (:func:`forecast.clean.regular`).
:func:`forecast.select.forecast_series` cleans more thoroughly (negative values, flags) and is
the entry point for real data.
Models may raise :class:`FitError` (or anything else: the selector treats every exception as a
failed candidate and records it); they never print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

LEVELS: tuple[int, int] = (80, 95)
# Standard normal quantiles of the two-sided central intervals used throughout.
Z = {80: 1.2815515655446004, 95: 1.959963984540054}


def z_of(level: int) -> float:
    """Upper standard-normal quantile of a central ``level`` % interval."""
    if level in Z:
        return Z[level]
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 200.0)


class FitError(Exception):
    """A model could not be fitted to this series (too short, degenerate, optimiser failed)."""


@dataclass(frozen=True)
class Prediction:
    """An h-step forecast: ``mean`` (the point forecast) and central intervals per level.

    ``lower[80]`` / ``upper[80]`` bound the 80 % interval. For models fitted on a transformed
    scale the point forecast is the back-transformed centre, i.e. the median (see
    :mod:`forecast.clean`).
    """

    mean: F64
    lower: dict[int, F64]
    upper: dict[int, F64]

    @property
    def h(self) -> int:
        return int(self.mean.shape[0])

    def lo(self, level: int) -> F64:
        return self.lower[level]

    def hi(self, level: int) -> F64:
        return self.upper[level]

    def clipped(self, floor: float = 0.0) -> Prediction:
        """Everything clipped at ``floor`` (spend and tokens are never negative)."""
        return Prediction(
            np.maximum(self.mean, floor),
            {k: np.maximum(v, floor) for k, v in self.lower.items()},
            {k: np.maximum(v, floor) for k, v in self.upper.items()},
        )

    @staticmethod
    def gaussian(mean: F64, sd: F64, levels: Sequence[int]) -> Prediction:
        """Symmetric normal intervals ``mean ± z * sd`` (sd per step)."""
        return Prediction(
            mean,
            {lv: mean - z_of(lv) * sd for lv in levels},
            {lv: mean + z_of(lv) * sd for lv in levels},
        )

    @staticmethod
    def nan(h: int, levels: Sequence[int] = LEVELS) -> Prediction:
        nan = np.full(h, np.nan)
        return Prediction(nan, {lv: nan.copy() for lv in levels}, {lv: nan.copy() for lv in levels})


@dataclass
class FitInfo:
    """What a fit reports besides the model: convergence and captured library warnings."""

    converged: bool = True
    warnings: list[str] = field(default_factory=list)


class Fitted(Protocol):
    """A model fitted to one series."""

    @property
    def info(self) -> FitInfo: ...

    @property
    def residuals(self) -> F64:
        """In-sample one-step errors on the model's own scale (NaN where undefined)."""
        ...

    def predict(self, h: int, levels: Sequence[int] = LEVELS) -> Prediction: ...


class Forecaster(Protocol):
    """A model specification; ``fit`` is pure (no state kept between fits)."""

    @property
    def name(self) -> str: ...

    @property
    def min_length(self) -> int:
        """Fewest observations ``fit`` accepts."""
        ...

    def fit(self, y: F64) -> Fitted: ...
