"""Builds the rules engine, scale advisor and cost ledger from settings, and runs their loops.

Part of the composition root: :func:`build_alerting` is called by ``build_runtime`` with the
parts it already built (engine, store, reader, registry, clock); nothing here reaches globals.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from alerts.cost_spike import CostSpikeChecks
from alerts.defaults import default_rule_groups
from alerts.engine import AlertSink, RuleEngine
from alerts.rulefile import RuleFileError, RuleGroup, load_rule_file
from alerts.scaling import ScaleAdvisor
from alerts.state_store import AlertStateStore
from cost.compute import MINUTE_MS, CostCalculator
from cost.ledger import CostLedger
from cost.prices import PriceBook
from cost.settled_minutes import SettledMinutes
from ha.role import ALONE, Leadership
from infermeter.forecasting import ForecastJob, build_forecasting
from infermeter.settings import Settings
from promql import SampleSource, Vector
from store.clock import Clock
from store.durations import parse_duration_ms
from store.interfaces import SampleSink, SeriesReader
from store.series_index import Matcher, Selector
from store.types import SampleBatch, SeriesKey

log = logging.getLogger(__name__)


def rule_paths(settings: Settings, config_path: str | None) -> list[Path]:
    base = Path(config_path).resolve().parent if config_path else Path.cwd()
    return [p if p.is_absolute() else base / p for p in map(Path, settings.alerts.rule_files)]


def load_rule_groups(settings: Settings, config_path: str | None) -> list[RuleGroup]:
    """The default pack (unless switched off) plus the configured files; raises RuleFileError."""
    groups = default_rule_groups(settings.alerts.thresholds) if settings.alerts.default_rules else []
    problems = []
    for path in rule_paths(settings, config_path):
        try:
            groups.extend(load_rule_file(path))
        except RuleFileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise RuleFileError(problems)
    return groups


@dataclass
class InstanceCounter:
    """Instances serving a scope now: distinct `instance` labels of its inference series."""

    reader: SeriesReader

    def __call__(self, scope: str, at_ms: int) -> int:
        matchers = (Matcher("model", "=", scope),) if scope != "fleet" else ()
        found = self.reader.instant(Selector("inference_requests_waiting", matchers), at_ms)
        return len({key.get("instance") for key, _, _ in found})


@dataclass
class RecordSink:
    """Recording rules write their results back into the store as ordinary series."""

    store: SampleSink

    def __call__(self, name: str, vector: Vector, at_ms: int) -> None:
        if not len(vector):
            return
        keys = [SeriesKey(name, tuple(p for p in labels if p[0] != "__name__")) for labels in vector.labels]
        batch = SampleBatch(keys, np.arange(len(keys), dtype=np.int64), np.full(len(keys), at_ms, np.int64), vector.values)
        self.store.append(batch)


@dataclass
class Alerting:
    rules: RuleEngine
    ledger: CostLedger
    advisor: ScaleAdvisor
    state_store: AlertStateStore
    book: PriceBook
    cost_interval_ms: int
    clock: Clock
    forecasting: ForecastJob | None = None
    leadership: Leadership = ALONE  # in an HA pair only the leader prices and forecasts
    # Before each tick: pick up prices and budgets changed through the API (by either process).
    before_tick: Callable[[], None] = lambda: None
    # After each tick: record version changes on the nodes as markers (releases.software).
    after_tick: Callable[[int], object] = lambda now_ms: None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.rules.start()
        if self.forecasting is not None:
            self.forecasting.start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._cost_loop, name="cost", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.rules.stop()
        if self.forecasting is not None:
            self.forecasting.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _cost_loop(self) -> None:
        # Tick a few seconds after each interval boundary so the minute just closed has landed.
        interval = self.cost_interval_ms
        while not self._stop.is_set():
            now = self.clock.now_ms()
            wake = (now // interval + 1) * interval + 5_000
            if self._stop.wait(max(0.0, (wake - now) / 1000)):
                return
            if not self.leadership.leading():
                continue
            try:
                self.before_tick()
                self.tick()
            except Exception:  # a failed tick is retried next interval; the loop lives on
                log.exception("cost tick failed")
            try:
                self.after_tick(self.clock.now_ms())
            except Exception:  # its own failure, not the tick's
                log.exception("recording software changes failed")

    def tick(self) -> None:
        """Price the hour in progress, write the live cost series and the forecast gauges."""
        samples = self.ledger.tick()
        if self.forecasting is not None and samples:
            extra = self.forecasting.samples(samples[0].ts_ms)
            if extra and self.ledger.append is not None:
                self.ledger.append(SampleBatch.from_samples(extra))


def build_alerting(
    settings: Settings,
    engine: Engine,
    store: SampleSink,
    reader: SeriesReader,
    source: SampleSource,
    clock: Clock,
    registry: CollectorRegistry,
    config_path: str | None,
    sink: AlertSink | None = None,
    leadership: Leadership = ALONE,
    nearest_change: Callable[[int, str], Any] | None = None,
) -> Alerting:
    """``engine``: for the leader-only parts' writes (fenced in an HA pair, :mod:`ha.fence`)."""
    groups = load_rule_groups(settings, config_path)
    count = InstanceCounter(reader)
    policy = settings.alerts.scaling
    advisor = ScaleAdvisor(parse_duration_ms(policy.cooldown), policy.min_instances, policy.max_instances, count, registry, engine)
    state_store = AlertStateStore(engine)
    rules = RuleEngine(
        groups,
        source,
        clock,
        registry,
        state_store=state_store,
        sink=sink,
        record=RecordSink(store),
        default_interval_ms=settings.alerts.evaluation_interval,
        external_url=settings.alerts.external_url,
        enrichers={"CostPerTokenSpike": CostSpikeChecks(source, advisor, count, nearest_change),
                   "TokenCostOverBudget": CostSpikeChecks(source, advisor, count, nearest_change)},
        observers=[advisor.observe],
        leadership=leadership,
    )
    book = PriceBook(settings.cost)
    host = socket.gethostname()
    # A minute is settled once samples that old are refused (the out-of-order window), plus a
    # minute for an agent's late delivery.
    settled = SettledMinutes(reader, clock, settings.store.out_of_order_window + MINUTE_MS)
    ledger = CostLedger(engine, CostCalculator(reader, book, host), book, clock, store.append,
                        live=CostCalculator(settled, book, host))
    forecasting = build_forecasting(engine, ledger, settings.cost.budgets, clock, settings.alerts.thresholds.cost_over_budget_ratio)
    forecasting.leadership = leadership
    return Alerting(rules, ledger, advisor, state_store, book, parse_duration_ms(settings.cost.interval), clock,
                    forecasting, leadership)
