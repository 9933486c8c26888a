"""The price book: $/GPU-hour by GPU model and purchase class, electricity $/kWh and PUE, and
overhead per node-hour, each effective from a timestamp; node facts (purchase class, the model
served); budgets. All of it lives under ``cost:`` in the config.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PURCHASE_CLASSES = ("on_demand", "spot", "reserved")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class _Effective(_Strict):
    effective_from: datetime = Field(
        EPOCH,
        description="in effect from this time (UTC unless an offset is given); a change re-prices history on "
        "request: `infermeter cost recompute --since DATE`",
    )

    @field_validator("effective_from")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return _utc(value)

    @property
    def from_ms(self) -> int:
        return int(self.effective_from.timestamp() * 1000)


class GpuPrice(_Effective):
    gpu_model: str = Field(description="case-insensitive substring of the NVML name, e.g. 'H100 80GB'; '*' matches all")
    purchase_class: str = Field("on_demand", description="on_demand, spot or reserved")
    dollars_per_gpu_hour: float = Field(ge=0, description="$ per GPU-hour")

    @field_validator("purchase_class")
    @classmethod
    def _known_class(cls, value: str) -> str:
        if value not in PURCHASE_CLASSES:
            raise ValueError(f"purchase_class must be one of {', '.join(PURCHASE_CLASSES)}")
        return value


class ElectricityPrice(_Effective):
    dollars_per_kwh: float = Field(ge=0, description="$ per kWh of electricity")
    pue: float = Field(1.0, ge=1.0, description="power usage effectiveness of the data centre")


class OverheadPrice(_Effective):
    dollars_per_node_hour: float = Field(ge=0, description="$ per node-hour (space, network, staff, ...)")


class NodeFacts(_Strict):
    host: str = Field(description="regex, fully anchored, on the GPU series' host label")
    purchase_class: str = Field("on_demand", description="on_demand, spot or reserved")
    model: str | None = Field(None, description="the model the node's GPUs serve (else found from labels)")

    @field_validator("host")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"bad regular expression: {exc}") from None
        return value


class Budget(_Strict):
    scope: str = Field("fleet", pattern="^(fleet|model)$", description="fleet, or model (then `model` is required)")
    model: str = Field("", description="the model label a model budget applies to")
    cost_per_million_tokens: float | None = Field(None, gt=0, description="$ per 1M generated tokens")
    spend_per_period: float | None = Field(None, gt=0, description="$ per period")
    period: str = Field("month", pattern="^(day|week|month)$", description="the period of spend_per_period")

    @model_validator(mode="after")
    def _scope_model(self) -> Budget:
        if self.scope == "model" and not self.model:
            raise ValueError("a model budget needs `model`")
        return self


class CostSettings(_Strict):
    currency: str = Field("USD", description="the currency of every price (shown in the API and reports)")
    gpu_prices: list[GpuPrice] = Field(
        default_factory=lambda: [GpuPrice(gpu_model="*", dollars_per_gpu_hour=2.0)],
        description="ours: a placeholder $2/GPU-hour until prices are configured",
    )
    electricity: list[ElectricityPrice] = Field(
        default_factory=lambda: [ElectricityPrice(dollars_per_kwh=0.12, pue=1.3)],
        description="electricity price and PUE, each from a date",
    )
    overhead: list[OverheadPrice] = Field(
        default_factory=lambda: [OverheadPrice(dollars_per_node_hour=0.0)],
        description="overhead per node-hour, each from a date",
    )
    cpu_dollars_per_node_hour: float = Field(
        0.40, ge=0,
        description="price of a node-hour of an engine that runs on CPUs only (gpus: [cpu] on a scrape target; "
        "the embedded worker without a GPU). The default is an example (a small cloud CPU VM), so a machine "
        "without GPUs shows the cost model working; set your own, or 0",
    )
    nodes: list[NodeFacts] = Field(
        default_factory=list,
        description="per node (regex on the host label): purchase class and, optionally, the model its GPUs serve",
    )
    default_purchase_class: str = Field("on_demand", description="purchase class of nodes no `nodes` entry matches")
    idle_utilization: float = Field(0.05, ge=0, lt=1, description="a GPU-minute below this is idle cost")
    budgets: list[Budget] = Field(
        default_factory=list, description="cost per 1M tokens and/or spend per period, for the fleet or one model"
    )
    interval: str = Field("1m", description="how often cost is computed (duration)")


class PriceBook:
    """Lookups over the settings; every lookup is "the entry in effect at this time"."""

    def __init__(self, settings: CostSettings) -> None:
        self.use(settings)

    def use(self, settings: CostSettings) -> None:
        """Switch to a changed book (prices edited through the API); later lookups see it."""
        self.settings = settings
        self._gpu = sorted(settings.gpu_prices, key=lambda p: p.from_ms)
        self._power = sorted(settings.electricity, key=lambda p: p.from_ms)
        self._overhead = sorted(settings.overhead, key=lambda p: p.from_ms)
        self._nodes = [(re.compile(n.host), n) for n in settings.nodes]

    def node(self, host: str) -> NodeFacts | None:
        for pattern, facts in self._nodes:
            if pattern.fullmatch(host):
                return facts
        return None

    def purchase_class(self, host: str) -> str:
        facts = self.node(host)
        return facts.purchase_class if facts else self.settings.default_purchase_class

    def gpu_price(self, gpu_model: str, purchase_class: str, at_ms: int) -> float:
        """$/GPU-hour; a specific model match beats '*'; the latest entry in effect wins."""
        name = gpu_model.lower()
        best: tuple[int, int, float] | None = None
        for price in self._gpu:
            if price.from_ms > at_ms or price.purchase_class != purchase_class:
                continue
            specific = 0 if price.gpu_model == "*" else 1
            if specific and price.gpu_model.lower() not in name:
                continue
            rank = (specific, price.from_ms, price.dollars_per_gpu_hour)
            if best is None or rank[:2] >= best[:2]:
                best = rank
        return best[2] if best else 0.0

    def cpu_price(self, at_ms: int) -> float:
        """$/node-hour of a CPU-only engine node (one price, not effective-dated)."""
        return self.settings.cpu_dollars_per_node_hour

    def electricity(self, at_ms: int) -> tuple[float, float]:
        """($/kWh, PUE) in effect."""
        current = None
        for price in self._power:
            if price.from_ms <= at_ms:
                current = price
        return (current.dollars_per_kwh, current.pue) if current else (0.0, 1.0)

    def overhead_per_node_hour(self, at_ms: int) -> float:
        current = None
        for price in self._overhead:
            if price.from_ms <= at_ms:
                current = price
        return current.dollars_per_node_hour if current else 0.0

    def change_points(self, start_ms: int, end_ms: int) -> list[int]:
        """Times inside (start, end) where any price changes."""
        stamps = {p.from_ms for p in (*self._gpu, *self._power, *self._overhead)}
        return sorted(t for t in stamps if start_ms < t < end_ms)
