"""The notification subsystem assembled: what the composition root builds once and starts.

    notifier = Notifier(settings.notify, engine, clock, registry, random.Random())
    notifier.start()                      # two daemon threads: pipeline, dispatcher (+ send pool)
    notifier.submit(alerts)               # from the rules engine, every evaluation; no I/O
    app.include_router(silences_router(lambda: notifier.silences, editor))  # editor: who, and the audit log
    notifier.stop(timeout_s=10)           # final; build a new Notifier to start again

Everything durable is in the database given (migrated to head), so a new Notifier on the same
database drains the outbox and continues the groups of the previous one.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from alerts.model import Alert
from alerts.notify.config import NotifyConfig
from alerts.notify.dispatcher import Dispatcher, Waiter, event_wait
from alerts.notify.integrations import build_integrations
from alerts.notify.metrics import NotifyMetrics
from alerts.notify.outbox import Outbox
from alerts.notify.pipeline import NotificationPipeline, new_notification_id
from alerts.notify.silences import SilenceStore
from alerts.notify.sinks import ClientFactory, default_client
from ha.role import ALONE, Leadership
from store.clock import Clock


class Notifier:
    def __init__(
        self,
        config: NotifyConfig,
        engine: Engine,
        clock: Clock,
        registry: CollectorRegistry,
        rng: random.Random,
        *,
        client_factory: ClientFactory = default_client,
        waiter: Waiter = event_wait,
        new_id: Callable[[], str] = new_notification_id,
        new_silence_id: Callable[[], str] | None = None,
        leadership: Leadership = ALONE,
        confirm: Callable[[], bool] = lambda: True,
        silences_engine: Engine | None = None,
    ) -> None:
        """In an HA pair, ``engine`` fences its writes (:mod:`ha.fence`), ``leadership`` gates
        the loops and ``confirm`` each send; silences, set through the API of either process,
        go through ``silences_engine``."""
        self.config = config
        self.metrics = NotifyMetrics(registry)
        # In a pair the other process may set silences too: reads refresh once a second.
        self.silences = SilenceStore(silences_engine or engine, clock, new_silence_id,
                                     max_age_ms=1000 if silences_engine is not None else 0)
        self.outbox = Outbox(engine)
        by_receiver = build_integrations(config, clock, client_factory)
        self.dispatcher = Dispatcher(
            self.outbox,
            {i.key: i for items in by_receiver.values() for i in items},
            clock,
            rng,
            config.retry,
            config.delivery,
            self.metrics,
            waiter,
            leadership,
            confirm,
        )
        self.pipeline = NotificationPipeline(
            engine, config, by_receiver, self.silences, clock, self.metrics,
            new_id=new_id, on_enqueue=self.dispatcher.wake, waiter=waiter, leadership=leadership,
        )
        self.started = False

    def submit(self, alerts: Sequence[Alert]) -> None:
        self.pipeline.submit(alerts)

    def start(self) -> None:
        if self.started:
            return
        self.pipeline.start()
        self.dispatcher.start()
        self.started = True

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stores what was submitted, waits for sends in flight; False if one was left running
        (its row is retried after its lease by the next Notifier on this database)."""
        self.pipeline.stop(timeout_s)
        done = self.dispatcher.stop(timeout_s)
        self.started = False
        return done
