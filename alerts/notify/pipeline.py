"""The notification pipeline: alerts in, grouped and de-duplicated notifications into the outbox.

``submit`` only records the alerts (under a lock, no I/O). ``tick`` — run by the pipeline's
own thread, or called directly by fake-clock tests — does the rest, in Alertmanager's order:

1. ingest: merge submitted alerts; a firing alert not re-submitted within ``resolve_timeout``
   resolves; route each new alert into its aggregation group(s).
2. flush every group whose time has come (``group_wait`` after the group appeared — at once
   if its alert is already older than that — then every ``group_interval``): drop silenced
   and inhibited alerts, ask :func:`dedup.decide` per integration (new alerts, resolutions,
   ``repeat_interval``), render the body.
3. commit, in one transaction: outbox rows, notification-log entries and held-alert changes.
   Only after the commit does the in-memory state move on, so a failed commit is a flush that
   simply happens again on the next tick.

Resolved alerts leave their group once a flush has seen them. Everything the pipeline must
remember lives in ``notify_alerts`` and ``notify_log``, so a new pipeline on the same database
continues where the old one stopped, without re-waiting and without repeating itself.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy import Engine

from alerts.model import Alert
from alerts.notify import state
from alerts.notify.config import NotifyConfig
from alerts.notify.dedup import LogEntry, decide, reported_resolved
from alerts.notify.dispatcher import Waiter, event_wait
from alerts.notify.groups import Group, GroupId, Held, Mutes, Plan, notification_order, same_news
from alerts.notify.inhibit import Inhibitor, InhibitRule
from alerts.notify.integrations import Integration
from alerts.notify.metrics import NotifyMetrics
from alerts.notify.outbox import Outbox, OutboxRow
from alerts.notify.payloads import Notification
from alerts.notify.routing import compile_routes
from alerts.notify.silences import SilenceStore
from ha.role import ALONE, Leadership
from store.clock import Clock

log = logging.getLogger(__name__)

GC_EVERY_MS = 60_000
GAUGES_EVERY_MS = 15_000


COALESCE_S = 0.1


def new_notification_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


class NotificationPipeline:
    def __init__(
        self,
        engine: Engine,
        config: NotifyConfig,
        integrations: Mapping[str, Sequence[Integration]],
        silences: SilenceStore,
        clock: Clock,
        metrics: NotifyMetrics,
        *,
        new_id: Callable[[], str] = new_notification_id,
        on_enqueue: Callable[[], None] | None = None,
        waiter: Waiter = event_wait,
        leadership: Leadership = ALONE,
    ) -> None:
        self._engine = engine
        self._leadership = leadership
        self._config = config
        self._root = compile_routes(config.route)
        self._rules = [InhibitRule.from_config(r) for r in config.inhibit_rules]
        self._integrations = {name: tuple(items) for name, items in integrations.items()}
        self._silences = silences
        self._clock = clock
        self._metrics = metrics
        self._new_id = new_id
        self._on_enqueue = on_enqueue
        self._waiter = waiter
        self._lock = threading.Lock()  # guards _pending only: submit never waits for a tick
        self._tick_lock = threading.RLock()  # guards everything else
        self._pending: dict[str, Alert] = {}
        self._held: dict[str, Held] = {}
        self._groups: dict[GroupId, Group] = {}
        self._persisted: set[str] = set()  # fingerprints with a notify_alerts row
        self._dirty: set[str] = set()  # held alerts (or deletions) not yet written
        self._last_gc_ms = 0
        self._last_gauges_ms = -GAUGES_EVERY_MS
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._log: dict[tuple[str, str], LogEntry] = {}
        self.reload()

    def reload(self) -> None:
        """Start over from the database: the held alerts and the notification log as stored
        (at construction, and when an HA pair hands this process the lead)."""
        with self._tick_lock:
            with self._lock:
                self._pending = {}
            self._held, self._groups, self._persisted, self._dirty = {}, {}, set(), set()
            self._log = state.load_log(self._engine)
            now = self._clock.now_ms()
            for alert in state.load_alerts(self._engine):
                self._persisted.add(alert.fingerprint)
                held = Held(alert, now)
                self._held[alert.fingerprint] = held
                self._attach(held, now)

    # -- the rules engine's side ----------------------------------------------------------------
    def submit(self, alerts: Sequence[Alert]) -> None:
        """Hands over firing and just-resolved alerts; never blocks on I/O. Thread-safe."""
        with self._lock:
            for alert in alerts:
                self._pending[alert.fingerprint] = alert
        self._wake.set()

    # -- one step -------------------------------------------------------------------------------
    def tick(self) -> int:
        """Ingests, flushes due groups, commits; returns ms until something is due next."""
        with self._tick_lock:
            return self._tick()

    def _tick(self) -> int:
        now = self._clock.now_ms()
        with self._lock:
            pending, self._pending = self._pending, {}
        self._ingest(pending, now)
        due = sorted((g for g in self._groups.values() if g.next_flush_ms <= now), key=lambda g: (g.next_flush_ms, g.key))
        plan = Plan()
        mutes = self._mutes(now) if due or now - self._last_gauges_ms >= GAUGES_EVERY_MS else None
        for group in due:
            assert mutes is not None
            try:
                self._plan_flush(group, now, mutes, plan)
            except Exception:  # one group that cannot be rendered must not stop the others
                log.exception("notification group %s could not be flushed", group.key)
                group.next_flush_ms = now + group.route.group_interval_ms
        self._commit(plan, now)
        if mutes is not None and now - self._last_gauges_ms >= GAUGES_EVERY_MS:
            self._last_gauges_ms = now
            self._update_gauges(mutes)
        if now - self._last_gc_ms >= GC_EVERY_MS:
            self._last_gc_ms = now
            self._gc(now)
        if plan.rows and self._on_enqueue is not None:
            self._on_enqueue()
        return self._next_due_ms(now)

    def _ingest(self, pending: Mapping[str, Alert], now: int) -> None:
        for fp, alert in pending.items():
            held = self._held.get(fp)
            if alert.status == "resolved":
                if held is None:
                    continue  # nobody was told it fired
                resolved = alert if alert.ends_at_ms is not None else dataclasses.replace(alert, ends_at_ms=now)
                if not same_news(held.alert, resolved):
                    held.alert = resolved
                    self._dirty.add(fp)
                continue
            if held is None:
                held = Held(alert, now)
                self._held[fp] = held
                self._attach(held, now)
                self._dirty.add(fp)
                continue
            held.last_seen_ms = now
            if not same_news(held.alert, alert):
                held.alert = alert
                self._dirty.add(fp)
        timeout = self._config.resolve_timeout
        for fp, held in self._held.items():
            if held.alert.status == "firing" and held.last_seen_ms + timeout <= now:
                held.alert = dataclasses.replace(held.alert, status="resolved", ends_at_ms=held.last_seen_ms + timeout)
                self._dirty.add(fp)

    def _attach(self, held: Held, now: int) -> None:
        labels = held.alert.labels
        for route in self._root.match(labels):
            gid = (route.route_id, route.group_key(labels))
            group = self._groups.get(gid)
            if group is None:
                group = Group(route, gid[1], route.group_labels(labels), next_flush_ms=now + route.group_wait_ms)
                self._groups[gid] = group
            group.members.add(held.alert.fingerprint)
            held.groups.add(gid)
            # Alertmanager: an alert already older than group_wait is late; do not wait for it.
            if not group.flushed and held.alert.starts_at_ms + route.group_wait_ms <= now:
                group.next_flush_ms = min(group.next_flush_ms, now)

    def _mutes(self, now: int) -> Mutes:
        firing = (h.alert for h in self._held.values() if h.alert.status == "firing")
        return Mutes(self._silences, Inhibitor(self._rules, firing), now)

    def _plan_flush(self, group: Group, now: int, mutes: Mutes, into: Plan) -> None:
        plan = Plan()  # merged into ``into`` only when the whole group is planned
        route = group.route
        alerts = [self._held[fp].alert for fp in group.members]
        firing = sorted((a for a in alerts if a.status == "firing" and mutes.why(a) is None), key=notification_order)
        resolved = {a.fingerprint: a for a in alerts if a.status == "resolved"}
        firing_fps = frozenset(a.fingerprint for a in firing)
        for integration in self._integrations.get(route.receiver, ()):
            entry = self._log.get((integration.key, group.key))
            decision = decide(
                entry, firing_fps, set(resolved), now_ms=now,
                repeat_ms=integration.repeat_ms(route), send_resolved=integration.send_resolved,
            )
            if not decision.notify:
                continue
            told = reported_resolved(entry, set(resolved)) if integration.send_resolved else frozenset()
            shown = firing + sorted((resolved[fp] for fp in told), key=notification_order)
            if shown:
                note = Notification(
                    integration.receiver, group.key, group.labels, shown,
                    self._config.external_url, decision.reason.value, now,
                )
                plan.rows.append(OutboxRow(
                    id=self._new_id(), integration=integration.key, receiver=integration.receiver,
                    kind=integration.kind, group_key=group.key, body=integration.render(note, route),
                    created_ms=now, next_attempt_ms=now, updated_ms=now,
                ))
            plan.log.append((integration.key, group.key, LogEntry(now, firing_fps, told)))
        plan.flushed.append((group, set(resolved)))
        into.rows += plan.rows
        into.log += plan.log
        into.flushed += plan.flushed

    def _commit(self, plan: Plan, now: int) -> None:
        # Resolved alerts seen by a flush leave that group; with no group left, they go.
        leaving: dict[str, set[GroupId]] = {}
        for group, dropped in plan.flushed:
            for fp in dropped:
                leaving.setdefault(fp, set()).add((group.route.route_id, group.key))
        gone = {fp for fp, gids in leaving.items() if not (self._held[fp].groups - gids)}
        dirty = set(self._dirty) | gone
        if dirty or plan.log or plan.rows:
            self._write(plan, dirty, gone, now)
        # A flush with nothing to write still moves its group on to the next group_interval.
        # Returning before this left such a group due: every tick flushed it again (the
        # pipeline's thread spun at wait 0 while nothing changed, a quarter of the process's
        # CPU at 100 targets), and an alert joining it was sent at once, not at the interval.
        for group, _ in plan.flushed:
            group.flushed = True
            group.next_flush_ms = now + group.route.group_interval_ms
        for fp, gids in leaving.items():
            held = self._held[fp]
            for gid in gids:
                held.groups.discard(gid)
                self._groups[gid].members.discard(fp)
            if fp in gone:
                del self._held[fp]
        for group, _ in plan.flushed:
            if not group.members:
                del self._groups[(group.route.route_id, group.key)]

    def _write(self, plan: Plan, dirty: set[str], gone: set[str], now: int) -> None:
        """Outbox rows, log entries and held-alert changes in one transaction; once committed,
        the memory of what is stored moves on."""
        inserted = [self._held[fp].alert for fp in dirty if fp not in gone and fp not in self._persisted]
        updated = [self._held[fp].alert for fp in dirty if fp not in gone and fp in self._persisted]
        deleted = [fp for fp in gone if fp in self._persisted]
        with self._engine.begin() as conn:
            state.write_alerts(conn, inserted, updated, deleted, now)
            for key, group_key, entry in plan.log:
                state.write_log(conn, key, group_key, entry, exists=(key, group_key) in self._log)
            Outbox.add(conn, plan.rows)
        self._dirty.clear()
        self._persisted |= {a.fingerprint for a in inserted}
        self._persisted -= set(deleted)
        for key, group_key, entry in plan.log:
            self._log[(key, group_key)] = entry
        for row in plan.rows:
            self._metrics.enqueued.labels(row.integration).inc()

    def _next_due_ms(self, now: int) -> int:
        due = now + self._config.delivery.poll_interval
        for group in self._groups.values():
            due = min(due, group.next_flush_ms)
        timeout = self._config.resolve_timeout
        for held in self._held.values():
            if held.alert.status == "firing":
                due = min(due, held.last_seen_ms + timeout)
        return max(0, due - now)

    def _update_gauges(self, mutes: Mutes) -> None:
        counts = {"firing": 0, "resolved": 0, "silenced": 0, "inhibited": 0}
        for held in self._held.values():
            why = mutes.why(held.alert) if held.alert.status == "firing" else None
            counts[why or held.alert.status] += 1
        for name, count in counts.items():
            self._metrics.alerts.labels(name).set(count)
        self._metrics.groups.set(len(self._groups))

    def _gc(self, now: int) -> None:
        horizon = now - self._config.log_retention
        try:
            with self._engine.begin() as conn:
                state.gc_log(conn, horizon)
            self._log = {k: e for k, e in self._log.items() if e.sent_ms >= horizon}
            self._silences.gc(self._config.silence_retention)
        except Exception:
            log.exception("notification housekeeping failed")

    # -- inspection (API, tests) ----------------------------------------------------------------
    def groups(self) -> list[tuple[str, str, list[Alert]]]:
        """(receiver, group key, alerts) of the current aggregation groups."""
        with self._tick_lock:
            return [
                (g.route.receiver, g.key, [self._held[fp].alert for fp in sorted(g.members)])
                for g in sorted(self._groups.values(), key=lambda g: g.key)
            ]

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="notify-pipeline", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        term = self._leadership.term()
        while not self._stop.is_set():
            self._wake.clear()
            current = self._leadership.term()
            if current != term:  # the lead changed hands: continue from what the leader stored
                term = current
                try:
                    self.reload()
                except Exception:
                    log.exception("could not reload the notification state")
                    term = -1  # try again next pass
            if not current:  # following: the leader notifies
                self._waiter(self._wake, self._config.delivery.poll_interval / 1000)
                continue
            try:
                wait_ms = self.tick()
            except Exception:  # e.g. the database is away; the next tick retries the same work
                log.exception("notification pipeline tick failed")
                wait_ms = self._config.delivery.poll_interval
            if self._waiter(self._wake, wait_ms / 1000) and not self._stop.is_set():
                # The rules engine submits rule by rule; let the rest of its cycle arrive so one
                # tick ingests them all (a tick scans every held alert: with thousands of alerts,
                # a tick per submit would cost more than the scraping it sits beside).
                self._stop.wait(COALESCE_S)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stops the loop, then runs one last tick so alerts submitted meanwhile are stored."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        if not self._leadership.leading():
            return  # a follower has nothing of its own to store
        try:
            self.tick()
        except Exception:
            log.exception("final notification pipeline tick failed")
