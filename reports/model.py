"""The finance report as data: what a period cost, built from ledger queries, rendered elsewhere.

Nothing here reads a clock, a file or a database. :func:`reports.build.build_report` fills a
:class:`FinanceReport` from the narrow interfaces below, and the renderers (CSV, XLSX, PDF) only
format it, so every figure a reader sees in any format comes from the same numbers.

Interfaces (all structural, so the composition root passes what it already has):

* :class:`LedgerQueries` -- ``spend`` / ``tokens`` / ``hourly_series``; ``cost.ledger.CostLedger``
  is one.
* :data:`SpendForecast` -- ``(from_ms, to_ms) -> ForecastWindow | None``: projected spend of the
  rest of the period; ``None`` (or no callable at all) is shown as "no forecast available".
* :data:`AnomalySource` -- ``(start_ms, end_ms, limit) -> list[Anomaly]``: the cost alerts of the
  period; :class:`reports.anomalies.AlertHistoryAnomalies` reads them from the alert history.

Money is in the price book's currency (``currency``); every amount is a float in that currency,
never rounded here (renderers round for display; CSV/XLSX keep full precision).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cost.prices import CostSettings

COMPONENTS = ("gpu", "energy", "idle", "overhead")
ATTRIBUTED = ("gpu", "energy")  # busy GPU time and its energy: cost that served tokens
SPEND_DIMENSIONS = ("model", "node", "gpu_model", "tenant", "purchase_class")
TOKEN_DIMENSIONS = ("model", "node", "tenant")


class LedgerQueries(Protocol):
    def spend(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]: ...

    def tokens(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]: ...

    def hourly_series(self, start_ms: int, end_ms: int, model: str | None = None) -> dict[str, dict[int, float]]: ...


@dataclass(frozen=True)
class Period:
    """``[start_ms, end_ms)``, whole UTC days; ``label`` is what the user typed (``2026-11``)."""

    label: str
    start_ms: int
    end_ms: int

    @property
    def hours(self) -> float:
        return (self.end_ms - self.start_ms) / 3_600_000


@dataclass(frozen=True)
class ForecastWindow:
    """Projected spend for ``[from_ms, until_ms)``; ``until_ms`` may stop short of the period end
    when the forecast horizon does (then the rest is not projected, and the report says so)."""

    from_ms: int
    until_ms: int
    mean: float
    low: float | None = None  # lower bound of the band (``level`` %), None when unknown
    high: float | None = None
    level: int = 80
    source: str = "forecast"  # e.g. the model that produced it
    coverage: float | None = None  # share of backtest actuals the hourly band held, out of sample


SpendForecast = Callable[[int, int], ForecastWindow | None]


@dataclass(frozen=True)
class Anomaly:
    """One cost alert that fired in the period, with the checks it carried (seed 000 §4.2)."""

    alertname: str
    severity: str
    fired_at_ms: int
    resolved_at_ms: int | None
    value: float | None  # the alert's value: $ per 1M tokens at firing time
    labels: Mapping[str, str]
    summary: str = ""
    checks: Mapping[str, str] = field(default_factory=dict)  # check_utilization, check_request_mix, ...
    checks_note: str = ""  # why checks are missing, when they are

    @property
    def scope(self) -> str:
        model = self.labels.get("model", "")
        return f"model {model}" if model else self.labels.get("scope", "fleet") or "fleet"


AnomalySource = Callable[[int, int, int], list[Anomaly]]


@dataclass(frozen=True)
class ChangeLine:
    """One entry of the audit log in the period: a price, budget, rule, threshold, silence or
    token changed (``infermeter audit`` and ``GET /api/v1/audit`` have before and after)."""

    at_ms: int
    action: str
    target: str
    actor: str
    role: str
    address: str


ChangeSource = Callable[[int, int], list[ChangeLine]]


@dataclass(frozen=True)
class SoftwareLine:
    """One version or watched setting on one node in the period (see :mod:`drift.table`)."""

    node: str
    cluster: str
    component: str  # driver, cuda_driver, nvml, vbios, nccl, "engine vllm", or an NCCL_* / TORCH_NCCL_* name
    value: str
    first_ms: int
    last_ms: int
    odd: bool  # differs from what most nodes run at the end of the period
    replaced: str  # the value it replaced on that node within the period ("" if none)


SoftwareSource = Callable[[int, int], list[SoftwareLine]]


@dataclass(frozen=True)
class EventLine:
    """A deploy or config-change marker in the period (releases.markers)."""

    at_ms: int
    kind: str
    model: str
    version: str
    node: str
    message: str
    actor: str


EventSource = Callable[[int, int], list[EventLine]]


@dataclass(frozen=True)
class EvaluationLine:
    """One candidate of an ``infermeter evaluate`` run in the period, in its run's rank order."""

    at_ms: int
    run: int
    candidate: str
    gpu: str
    gpus: int
    purchase_class: str
    dollars_per_hour: float
    tokens_per_s_per_gpu: float | None
    ttft_p99_s: float | None
    itl_p99_ms: float | None
    dollars_per_million: float | None
    sla: str


EvaluationSource = Callable[[int, int], list[EvaluationLine]]


@dataclass(frozen=True)
class ReportSources:
    """Everything a report is built from; the CLI and the API each assemble one."""

    ledger: LedgerQueries
    settings: CostSettings
    now_ms: int
    anomalies: AnomalySource | None = None
    forecast: SpendForecast | None = None
    changes: ChangeSource | None = None
    software: SoftwareSource | None = None
    events: EventSource | None = None
    evaluations: EvaluationSource | None = None


# -- the report ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpendLine:
    dimension: str  # model | node | gpu_model | tenant | purchase_class | component
    key: str  # as stored ("" = not attributed / none)
    label: str  # what a person reads: "(unattributed)" for model ""
    dollars: float
    gpu_hours: float
    energy_kwh: float
    share: float  # of the period total, 0..1


@dataclass(frozen=True)
class TokenLine:
    dimension: str  # model | node | tenant | fleet
    key: str
    label: str
    prompt_tokens: float
    generated_tokens: float
    requests: float
    dollars: float  # spend of the same key (all components for model/node/fleet; see note)
    dollars_per_million_generated: float | None
    dollars_per_million_total: float | None  # per 1M prompt + generated tokens
    note: str = ""


@dataclass(frozen=True)
class Totals:
    gpu: float
    energy: float
    idle: float
    overhead: float
    total: float  # the ledger's own sum over all rows (not the sum of the lines above)

    @property
    def attributed(self) -> float:
        return self.gpu + self.energy

    @property
    def components_sum(self) -> float:
        return self.attributed + self.idle + self.overhead


@dataclass(frozen=True)
class Check:
    """One reconciliation: ``actual`` (a sum of lines) against ``expected`` (the total)."""

    name: str
    expected: float
    actual: float
    tolerance: float

    @property
    def difference(self) -> float:
        return self.actual - self.expected

    @property
    def ok(self) -> bool:
        return abs(self.difference) <= self.tolerance


@dataclass(frozen=True)
class BudgetLine:
    scope: str  # fleet | model
    model: str
    budget_period: str  # day | week | month (the budget's own period)
    spend_budget: float | None  # for this report's period (prorated when the periods differ)
    prorated: bool
    spent: float
    spend_ratio: float | None
    projected: float | None  # spent + forecast mean of the rest of the period (None: no forecast)
    projected_ratio: float | None
    unit_budget: float | None  # $ per 1M generated tokens
    unit_actual: float | None
    unit_ratio: float | None

    @property
    def status(self) -> str:
        ratios = [r for r in (self.spend_ratio, self.unit_ratio) if r is not None]
        if any(r > 1 for r in ratios):
            return "over budget"
        if self.projected_ratio is not None and self.projected_ratio > 1:
            return "on track to exceed"
        return "within budget" if ratios else "no budget figures"


@dataclass(frozen=True)
class ForecastSummary:
    """Spend so far and the projection of the rest of the period (forecast and run rate)."""

    state: str  # "open" (period in progress) | "closed" (ended) | "future" (not started)
    spent: float
    remaining_from_ms: int
    remaining_to_ms: int
    forecast: ForecastWindow | None
    run_rate_per_hour: float | None  # mean hourly spend of the trailing 7 days (or what exists)
    run_rate_rest: float | None  # run rate × hours left

    @property
    def projected_total(self) -> float | None:
        if self.forecast is None:
            return None
        return self.spent + self.forecast.mean

    @property
    def forecast_covers_rest(self) -> bool:
        return self.forecast is not None and self.forecast.until_ms >= self.remaining_to_ms


@dataclass(frozen=True)
class PriceLine:
    kind: str  # gpu | electricity | overhead
    item: str  # "H100 80GB / on_demand", "electricity", "overhead"
    rate: float
    unit: str  # "$/GPU-hour", "$/kWh", "$/node-hour"
    pue: float | None
    effective_from_ms: int
    effective_to_ms: int | None  # when a later entry of the same item replaces it
    in_period: bool  # in effect for some part of the report's period


@dataclass(frozen=True)
class DayLine:
    day_ms: int
    dollars: float
    cumulative: float


@dataclass(frozen=True)
class FinanceReport:
    period: Period
    currency: str
    generated_at_ms: int
    data_until_ms: int  # min(now, period end): the ledger holds nothing later
    totals: Totals
    spend: dict[str, list[SpendLine]]  # dimension -> lines, largest first
    tokens: dict[str, list[TokenLine]]  # dimension -> lines (plus "fleet")
    checks: list[Check]
    budgets: list[BudgetLine]
    forecast: ForecastSummary
    anomalies: list[Anomaly]
    anomalies_note: str
    prices: list[PriceLine]
    days: list[DayLine]
    idle_utilization: float
    notes: list[str] = field(default_factory=list)
    changes: list[ChangeLine] = field(default_factory=list)
    software: list[SoftwareLine] = field(default_factory=list)
    events: list[EventLine] = field(default_factory=list)
    evaluations: list[EvaluationLine] = field(default_factory=list)

    @property
    def reconciled(self) -> bool:
        return all(c.ok for c in self.checks)
