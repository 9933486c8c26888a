"""The composition root: builds every long-lived part once from Settings and owns their lives.

Order matters: the engine and the schema first (``up`` migrates to head before anything
reads), then the store (which rebuilds its head from the write-ahead table), then the loops.
Stopping runs the other way, and the store's last act is a checkpoint so a clean shutdown
leaves the write-ahead table empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector
from sqlalchemy import Engine, text

from access.audit import SYSTEM, Actor
from access.principal import Principal
from access.service import Access, build_access
from alerts.notify.service import Notifier
from alerts.rulefile import RuleFileError
from collector.exposition import SeriesCache
from collector.manager import ScrapeManager
from collector.nvml import render_dcgm
from collector.scrape_loop import appender_call
from cost.changes import CostChanges
from cost.prices import CostSettings
from forecast.ids import SeriesId
from forecast.record import StoredForecast
from forecast.service import ForecastService
from ha.role import ALONE, Leadership
from infermeter import db
from infermeter.alerting import Alerting, build_alerting, load_rule_groups
from infermeter.config_audit import config_changes, rule_file_digests
from infermeter.config_file import ConfigError, load_settings
from infermeter.cost_edits import edit_cost
from infermeter.live_cost import LiveCost
from infermeter.pair import Pair, PairCollector, build_pair
from infermeter.self_metrics import ApiMetrics, StoreCollector, build_registry
from infermeter.settings import Settings
from infermeter.targets import source_factories, target_specs
from infermeter.telemetry import Telemetry
from infermeter.tenant_series import TenantSeries
from promql import SampleSource
from promql.sources import StoreSource
from releases.markers import MarkerStore
from releases.software import SoftwareChangeRecorder
from remote import EngineClient, RemoteReader, RemoteSampleStore, RemoteSource
from remote.store import RemoteStoreCollector
from store.clock import Clock, SystemClock
from store.engine import create_store_engine
from store.interfaces import SampleStore, SeriesReader
from store.reader import Reader
from store.tsdb import TimeSeriesStore
from worker.child import EmbeddedWorker

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    clock: Clock
    store: SampleStore
    reader: SeriesReader
    registry: CollectorRegistry
    api_metrics: ApiMetrics
    # Where PromQL runs: over ``reader`` here, or in the remote engine.
    source: SampleSource
    # The embedded store (None on the remote backend, where /api/v1 reads go to the engine).
    tsdb: TimeSeriesStore | None = None
    engine_client: EngineClient | None = None
    push_cache: SeriesCache = field(default_factory=SeriesCache)
    # The series cache is not thread-safe and pushes parse on the thread pool; parsing is
    # CPU-bound under the GIL anyway, so serialising it costs nothing.
    push_lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    started: bool = False
    started_at_ms: int = 0  # when start() ran, by the runtime's clock (status/runtimeinfo)
    config_path: str | None = None
    scrapes: ScrapeManager | None = None  # built by build_runtime; loops start with the server
    telemetry: Telemetry | None = None
    access: Access = field(init=False)  # built by build_runtime
    markers: MarkerStore = field(init=False)  # deploy and config-change markers
    live_cost: LiveCost = field(init=False)  # the config's prices + those changed through the API
    rule_digests: dict[str, str] = field(default_factory=dict)  # of the rule files as last loaded
    tenant_series: TenantSeries = field(default_factory=TenantSeries)  # series each pusher created
    alerting: Alerting | None = None
    notifier: Notifier | None = None
    worker: EmbeddedWorker | None = None
    # The newest stored forecast by series id (``spend:fleet``), for the dashboard.
    forecast: StoredForecasts | None = None
    # An HA pair (ha.enabled): who leads; alone, this process always does.
    pair: Pair | None = None
    _follow_task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.started:
            return
        self.store.open()
        self.started_at_ms = self.clock.now_ms()
        self._stop.clear()
        if self.pair is not None:
            self.pair.elector.start()  # the role is known before the loops that depend on it start
        loop = threading.Thread(target=self._maintenance_loop, name="store-maintenance", daemon=True)
        loop.start()
        self._threads.append(loop)
        if self.notifier is not None:
            self.notifier.start()
        if self.alerting is not None:
            self.alerting.start()
        self.started = True

    def stop(self, timeout_s: float = 30.0) -> None:
        if not self.started:
            return
        self._stop.set()
        if self.alerting is not None:
            self.alerting.stop()
        if self.notifier is not None:
            self.notifier.stop()
        if self.pair is not None:
            self.pair.elector.stop()  # gives the lease up: the other process leads at once
            self.pair.leader_engine.dispose()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()
        self.store.close(flush=True)
        self.engine.dispose()
        if self.telemetry is not None:
            self.telemetry.shutdown()
        self.started = False

    def _maintenance_loop(self) -> None:
        interval = self.settings.store.maintenance_interval / 1000
        while not self._stop.wait(interval):
            try:
                self.store.maintain()
            except Exception:  # a failed pass must not end the loop; the next one retries
                log.exception("store maintenance failed")

    # -- collectors (async: they live on the server's event loop) -----------------------------
    async def start_collectors(self) -> None:
        if self.worker is not None:
            await self.worker.start()  # returns at once; the worker loads in the background
        if self.pair is not None:
            self._follow_task = asyncio.create_task(self._scrape_while_leading(), name="ha scrape role")
        else:
            await self._apply_targets()

    async def _apply_targets(self) -> None:
        """The configured targets, scraped by the leader only (an HA follower scrapes none)."""
        if self.scrapes is not None:
            await self.scrapes.apply(target_specs(self.settings) if self.leadership.leading() else [])

    async def _scrape_while_leading(self) -> None:
        leading: bool | None = None
        while True:
            now = self.leadership.leading()
            if now != leading:
                leading = now
                try:
                    await self._apply_targets()
                except Exception:
                    log.exception("could not apply the scrape targets for the new role")
                    leading = None
            await asyncio.sleep(0.25)

    async def stop_collectors(self) -> None:
        if self._follow_task is not None:
            self._follow_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follow_task
            self._follow_task = None
        if self.scrapes is not None:
            await self.scrapes.stop()
        if self.worker is not None:
            await self.worker.stop()

    async def reload(self, actor: Actor | None = None) -> list[str]:
        """Re-read the config file and apply its scrape targets, rules, thresholds and tokens;
        problems leave everything as is. What changed goes to the audit log (``actor``: who asked;
        default: the SIGHUP signal)."""
        try:
            settings, _ = load_settings(self.config_path)
        except ConfigError as exc:
            lines = [str(p) for p in exc.problems]
            log.error("reload refused, config is invalid:\n%s", "\n".join(lines))
            return lines
        reloadable = {"scrape", "nccl", "security"}
        if self.alerting is not None:
            try:
                groups = load_rule_groups(settings, self.config_path)
            except RuleFileError as exc:
                lines = [str(p) for p in exc.problems]
                log.error("reload refused, rule files are invalid:\n%s", "\n".join(lines))
                return lines
            self.alerting.rules.set_groups(groups)
            reloadable = reloadable | {"alerts"}
        if settings.model_dump(exclude=reloadable) != self.settings.model_dump(exclude=reloadable):
            log.warning("reload applies collection targets only; other changed settings need a restart")
        before, self.settings = self.settings, self.settings.model_copy(update={k: getattr(settings, k) for k in reloadable})
        await asyncio.to_thread(self._audit_reload, actor or Actor(SYSTEM, "signal:SIGHUP"), before)
        await self._apply_targets()
        return []

    def _audit_reload(self, actor: Actor, before: Settings) -> None:
        rules_now = rule_file_digests(self.settings, self.config_path)
        changed = config_changes(before, self.settings, self.rule_digests, rules_now)
        self.rule_digests = rules_now
        for section, (old, new) in changed.items():
            self.access.audit.record(actor, "config.reload", section, old, new)

    def use_cost(self, cost: CostSettings) -> None:
        """Price with a changed book from now on (the ledger, budgets, forecast warnings, reads)."""
        self.settings = self.settings.model_copy(update={"cost": cost})
        if self.alerting is not None:
            self.alerting.book.use(cost)
            if self.alerting.forecasting is not None:
                self.alerting.forecasting.budgets = list(cost.budgets)

    def edit_cost(self, action: str, fields: dict[str, Any], principal: Principal, address: str) -> dict[str, Any]:
        """The dashboard's price and budget changes (the API's routes use the same editor)."""
        return edit_cost(self, action, fields, Actor(principal, address))

    def dcgm_exposition(self) -> str:
        """Local GPU series under dcgm-exporter's names, when configured (for /metrics)."""
        gpu = self.settings.gpu
        if not gpu.dcgm_names_on_metrics or self.scrapes is None:
            return ""
        return "".join(
            render_dcgm(batch, hostname_label=gpu.dcgm_hostname_label) for batch in self.scrapes.latest("nvml")
        )

    # -- health ------------------------------------------------------------------------------
    def readiness(self) -> dict[str, str]:
        """Problems keyed by component; empty when ready."""
        problems: dict[str, str] = {}
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:
            problems["store"] = f"database unreachable: {type(exc).__name__}: {exc}"
            return problems
        try:
            current, head = db.current_revision(self.engine), db.head_revision(self.engine)
            if current != head:
                problems["schema"] = f"schema at {current}, code expects {head}: run `infermeter db upgrade`"
        except Exception as exc:
            problems["schema"] = f"cannot read the schema revision: {exc}"
        if self.engine_client is not None:
            trouble = self.engine_client.healthy(self.clock.now_ms())
            if trouble:
                problems["engine"] = trouble
        if not self.started:
            problems["runtime"] = "not started"
        return problems

    @property
    def leadership(self) -> Leadership:
        return self.pair.elector if self.pair is not None else ALONE

    def role(self) -> dict[str, object]:
        """This process's part: "leader" or "follower" of an HA pair, or "single"."""
        if self.pair is None:
            return {"role": "single"}
        return self.pair.describe()


@dataclass(frozen=True)
class StoredForecasts:
    service: ForecastService

    def latest(self, series_id: str) -> StoredForecast | None:
        return self.service.latest(SeriesId.parse(series_id))


@dataclass(frozen=True)
class Samples:
    """The samples side of the runtime, embedded or remote (``store.backend``)."""

    store: SampleStore
    reader: SeriesReader
    source: SampleSource
    metrics: Collector
    tsdb: TimeSeriesStore | None = None
    client: EngineClient | None = None


def build_samples(settings: Settings, engine: Engine, clock: Clock) -> Samples:
    if settings.store.backend == "remote":
        remote = settings.store.remote
        client = EngineClient(remote.query_url, remote.headers, remote.timeout / 1000)
        reader = RemoteReader(client, clock)
        writer = RemoteSampleStore(
            remote.write_url, Path(remote.queue_dir), clock, headers=remote.headers, timeout_s=remote.timeout / 1000,
            flush_s=remote.flush_interval / 1000,
            max_queue_bytes=remote.max_queue_bytes, external_labels=remote.external_labels,
            max_future_ms=settings.store.max_future,
        )
        return Samples(writer, reader, RemoteSource(client, reader), RemoteStoreCollector(writer), client=client)
    tsdb = TimeSeriesStore(engine, clock, settings.store.options())
    local = Reader(tsdb)
    return Samples(tsdb, local, StoreSource(local), StoreCollector(tsdb), tsdb=tsdb)


def build_runtime(
    settings: Settings,
    clock: Clock | None = None,
    migrate: bool = True,
    config_path: str | None = None,
    nvml_module: Any = None,
) -> Runtime:
    clock = clock or SystemClock()
    engine = create_store_engine(
        settings.store.url,
        sqlite_synchronous=settings.store.sqlite_synchronous,
        busy_timeout_ms=settings.store.busy_timeout,
    )
    if migrate:
        db.upgrade(engine)
    samples = build_samples(settings, engine, clock)
    scrapes = ScrapeManager(appender_call(samples.store), clock, factories=source_factories(clock, nvml_module))
    registry, api_metrics = build_registry(samples.metrics, scrapes.statuses)
    pair = build_pair(settings, engine)
    leader_engine = pair.leader_engine if pair is not None else engine  # leader-only writes go here
    if pair is not None:
        registry.register(PairCollector(pair))
    tel = settings.telemetry
    telemetry = Telemetry(tel.otlp_endpoint, tel.export_interval, tel.service_name, samples.tsdb, scrapes.statuses)
    scrapes.tracer = telemetry.tracer
    runtime = Runtime(
        settings=settings,
        engine=engine,
        clock=clock,
        store=samples.store,
        reader=samples.reader,
        registry=registry,
        api_metrics=api_metrics,
        source=samples.source,
        tsdb=samples.tsdb,
        engine_client=samples.client,
        config_path=config_path,
        scrapes=scrapes,
        telemetry=telemetry,
        pair=pair,
    )
    # Tokens and the audit log are written by either process of a pair: the unfenced engine.
    runtime.access = build_access(
        engine, clock, settings.security, lambda: runtime.settings.server.api_token,
        lambda: runtime.settings.server.open_reads, lambda: tuple(runtime.settings.security.tokens),
    )
    runtime.markers = MarkerStore(engine, clock)  # user input, as tokens: either process of a pair writes
    if settings.worker.embedded:
        runtime.worker = EmbeddedWorker(settings.worker)
    # The notifier reads its outbox and groups from the database: built after the migration.
    runtime.notifier = Notifier(
        settings.notify, leader_engine, clock, registry, random.Random(), leadership=runtime.leadership,
        confirm=pair.fence.confirm if pair is not None else (lambda: True),
        silences_engine=engine if pair is not None else None,
    )
    runtime.alerting = build_alerting(
        settings, leader_engine, samples.store, runtime.reader, samples.source, clock, registry, config_path,
        sink=runtime.notifier.submit, leadership=runtime.leadership, nearest_change=runtime.markers.nearest_before,
    )
    runtime.alerting.after_tick = SoftwareChangeRecorder(runtime.reader, runtime.markers)
    runtime.rule_digests = rule_file_digests(settings, config_path)
    runtime.live_cost = LiveCost(CostChanges(engine, clock), settings.cost, runtime.use_cost)
    runtime.live_cost.refresh()
    runtime.alerting.before_tick = runtime.live_cost.refresh
    if runtime.alerting.forecasting is not None:
        runtime.forecast = StoredForecasts(runtime.alerting.forecasting.service)
    return runtime
