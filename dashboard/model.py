"""Plain data handed from the queries to the figure builders (no plotly, no store types)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Line:
    """One trace: values at bucket starts ``ts_ms`` (NaN where there was no sample)."""

    name: str
    ts_ms: I64
    values: F64
    group: str = ""  # legend group / colour key, e.g. the model
    labels: dict[str, str] = field(default_factory=dict)

    def has_data(self) -> bool:
        return bool(len(self.values)) and bool(np.isfinite(self.values).any())


@dataclass(frozen=True)
class Kpi:
    title: str
    value: float | None
    prefix: str = ""
    suffix: str = ""
    reference: float | None = None  # a budget or a target to compare against
    reference_label: str = "budget"
    lower_is_better: bool = True
    hint: str = ""  # what to configure when the value is missing
    digits: int = 3
    as_share: bool = False  # show "x % of the reference" instead of the change against it


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    group: str = ""
    flagged: bool = False
    note: str = ""


@dataclass(frozen=True)
class Event:
    ts_ms: int
    target: str  # e.g. "node-1/3"
    kind: str  # e.g. "XID", "ECC uncorrected"
    detail: str


@dataclass(frozen=True)
class Band:
    """A forecast path: mean and central 80 / 95 % bounds at ``ts_ms``."""

    ts_ms: I64
    mean: F64
    lo80: F64
    hi80: F64
    lo95: F64
    hi95: F64
    label: str = "forecast"
    coverage: dict[int, float] | None = None  # per level, the share of backtest actuals the band held


@dataclass(frozen=True)
class BudgetLine:
    amount: float
    label: str  # e.g. "fleet budget per month"
    period_start_ms: int
    period_end_ms: int


@dataclass(frozen=True)
class Crossing:
    at_ms: int | None  # mean path
    upper_at_ms: int | None  # upper-80 % path
    message: str


@dataclass(frozen=True)
class SizePoint:
    series: str  # e.g. "AllReduce (Inspector)"
    size_bytes: float
    value: float




@dataclass(frozen=True)
class AlertRow:
    name: str
    state: str  # firing | pending | resolved
    severity: str
    since_ms: int
    summary: str
    runbook: str
    labels: dict[str, str]
    value: float
    silenced: bool = False  # an active silence mutes its notifications


__all__ = ["Line", "Kpi", "Bar", "Event", "Band", "BudgetLine", "Crossing", "SizePoint", "AlertRow", "I64", "F64"]
