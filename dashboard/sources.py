"""What the dashboard reads, as narrow protocols, and the one adapter from the runtime.

The dashboard never reaches into globals: :func:`sources_from_runtime` picks the parts it
needs off the composition root's runtime once, at mount time, and everything below gets a
:class:`Sources`. Optional parts (the rules engine, the cost ledger, notification, forecasts)
may be absent; the panels that need them then show what to configure.

Forecasts: the forecast service is wired separately. The panels only need
:class:`ForecastSource` -- ``latest(series_id)`` with series ids as the forecast service
names them (``spend:fleet``, ``spend:model=<m>``, ``tokens:fleet``, ``cost_per_mtok:fleet``)
returning hourly points (mean and 80 / 95 % bounds) or ``None``. The runtime attribute
``forecast`` is read when present.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from access.principal import Principal
from alerts.engine import RuleEngine
from alerts.notify.silences import SilenceStore
from alerts.scaling import ScaleAdvisor
from alerts.state_store import AlertStateStore
from cost.compute import instance_host
from cost.ledger import CostLedger
from cost.prices import CostSettings
from dashboard.auth import Authenticates
from dashboard.settings import DashboardSettings
from promql import SampleSource
from store.clock import Clock
from store.interfaces import SeriesReader

F64 = npt.NDArray[np.float64]


class ForecastPoints(Protocol):
    """An hourly forecast: point ``i`` covers ``[start_ms + i*step_ms, start_ms + (i+1)*step_ms)``;
    values per hour ($/h, tokens/h) or per 1M tokens. ``forecast.record.StoredForecast`` is one."""

    @property
    def start_ms(self) -> int: ...

    @property
    def step_ms(self) -> int: ...

    @property
    def generated_at_ms(self) -> int: ...

    @property
    def model(self) -> str: ...

    @property
    def mean(self) -> F64: ...

    @property
    def lo80(self) -> F64: ...

    @property
    def hi80(self) -> F64: ...

    @property
    def lo95(self) -> F64: ...

    @property
    def hi95(self) -> F64: ...

    @property
    def backtest_coverage80(self) -> float | None: ...

    @property
    def backtest_coverage95(self) -> float | None: ...

class ForecastSource(Protocol):
    def latest(self, series_id: str) -> ForecastPoints | None:
        """The newest stored forecast of ``series_id`` (``spend:fleet``...), or None."""
        ...


# -- the runtime, as far as the dashboard is concerned ------------------------------------------
class _Server(Protocol):
    @property
    def api_token(self) -> str | None: ...


class _Settings(Protocol):
    @property
    def server(self) -> _Server: ...

    @property
    def cost(self) -> CostSettings: ...


class _Alerting(Protocol):
    @property
    def rules(self) -> RuleEngine: ...

    @property
    def ledger(self) -> CostLedger: ...

    @property
    def state_store(self) -> AlertStateStore: ...

    @property
    def advisor(self) -> ScaleAdvisor: ...


class _Notifier(Protocol):
    @property
    def silences(self) -> SilenceStore: ...


class RuntimeLike(Protocol):
    """The parts of ``infermeter.runtime.Runtime`` the dashboard reads (structural)."""

    @property
    def settings(self) -> _Settings: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def reader(self) -> SeriesReader: ...

    @property
    def alerting(self) -> _Alerting | None: ...

    @property
    def notifier(self) -> _Notifier | None: ...

    @property
    def access(self) -> _Access: ...


class _Access(Protocol):
    @property
    def auth(self) -> Authenticates: ...


@dataclass(frozen=True)
class Targets:
    """The default alert pack's thresholds, drawn as reference lines (``alerts.thresholds``)."""

    throughput_below_mean_ratio: float = 0.30  # per-GPU tokens/s outliers, as GpuThroughputLow
    inter_token_p99_seconds: float = 0.050
    ttft_p99_seconds: float = 2.0
    e2e_p99_seconds: float = 30.0
    failure_rate: float = 0.005
    utilization_target: float = 0.70
    imbalance_high: float = 0.90
    imbalance_low: float = 0.30
    gpu_memory_ratio: float = 0.90
    gpu_temperature_celsius: float = 85.0
    moe_max_over_mean: float = 2.0

    @classmethod
    def of(cls, thresholds: object) -> Targets:
        """From an ``alerts.thresholds`` object (anything with those attributes)."""
        if thresholds is None:
            return cls()
        values = {name: float(getattr(thresholds, name)) for name in cls.__dataclass_fields__ if hasattr(thresholds, name)}
        return cls(**values)


@dataclass(frozen=True)
class Sources:
    clock: Clock
    reader: SeriesReader
    cost: CostSettings
    ledger: CostLedger | None = None
    rules: RuleEngine | None = None
    history: AlertStateStore | None = None
    advisor: ScaleAdvisor | None = None
    silences: SilenceStore | None = None
    forecasts: ForecastSource | None = None
    targets: Targets = field(default_factory=Targets)
    # instance label -> node, as the cost ledger attributes it (loopback means this host).
    node_of: Callable[[str], str] = field(default=lambda instance: local_node(instance))
    promql: SampleSource | None = None  # where expressions run (None: over ``reader``, here)
    # This process's part: {"role": "single"} or an HA pair's "leader"/"follower" with its holder.
    role: Callable[[], dict[str, object]] = field(default=lambda: _ALONE)
    # The price book now (prices and budgets edited through the API change it); None: ``cost``.
    live_cost: Callable[[], CostSettings] | None = None
    # Change prices and budgets as ``principal`` from ``address``: (action, fields, principal,
    # address) -> what was stored; raises ValueError naming the problem. None: read-only.
    edit_cost: Callable[[str, dict[str, Any], Principal, str], dict[str, Any]] | None = None
    # Deploy and config-change markers in [start, end] for a model (None: all), drawn on the
    # time charts (releases.markers.MarkerStore.between); None: no markers.
    markers: Callable[[int, int, str | None], list[Any]] | None = None

    def price_book(self) -> CostSettings:
        return self.live_cost() if self.live_cost is not None else self.cost


_ALONE: dict[str, object] = {"role": "single"}


def local_node(instance: str) -> str:
    return instance_host(instance, socket.gethostname())


def dashboard_settings(runtime: object) -> DashboardSettings:
    found = getattr(getattr(runtime, "settings", None), "dashboard", None)
    return found if isinstance(found, DashboardSettings) else DashboardSettings()


def sources_from_runtime(runtime: RuntimeLike) -> Sources:
    alerting = runtime.alerting
    notifier = runtime.notifier
    thresholds = getattr(getattr(runtime.settings, "alerts", None), "thresholds", None)
    ledger = alerting.ledger if alerting is not None else None
    node_of: Callable[[str], str] = ledger.calc.node_of if ledger is not None else local_node
    return Sources(
        clock=runtime.clock,
        reader=runtime.reader,
        cost=runtime.settings.cost,
        ledger=ledger,
        rules=alerting.rules if alerting is not None else None,
        history=alerting.state_store if alerting is not None else None,
        advisor=alerting.advisor if alerting is not None else None,
        silences=notifier.silences if notifier is not None else None,
        forecasts=getattr(runtime, "forecast", None),
        targets=Targets.of(thresholds),
        node_of=node_of,
        promql=getattr(runtime, "source", None),
        role=getattr(runtime, "role", lambda: _ALONE),
        live_cost=lambda: runtime.settings.cost,
        edit_cost=getattr(runtime, "edit_cost", None),
        markers=_markers_of(runtime),
    )


def _markers_of(runtime: RuntimeLike) -> Callable[[int, int, str | None], list[Any]] | None:
    store = getattr(runtime, "markers", None)
    if store is None:
        return None
    return lambda start, end, model: list(store.between(start, end, model=model))


__all__ = ["ForecastPoints", "ForecastSource", "RuntimeLike", "Sources", "Targets", "local_node", "dashboard_settings", "sources_from_runtime"]
