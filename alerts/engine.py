"""The rules engine: evaluates groups at their interval, runs each rule's state machine, hands
alerts to notification, and reports health, last error and evaluation time per rule.

A failing rule is recorded (health "err", the message) and the group goes on with the next rule.
All rules of a group are evaluated at one instant through one :class:`EvalContext`, so shared
selectors are read once per cycle.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from alerts.model import Alert
from alerts.rulefile import Rule, RuleGroup
from alerts.state import FIRING, PENDING, AlertInstance, RuleState, Transition
from alerts.state_store import AlertStateStore
from alerts.template import render
from ha.fence import NotLeader
from ha.role import ALONE, Leadership
from promql import EvalContext, ExprError, SampleSource, Vector, context_at
from store.clock import Clock

log = logging.getLogger(__name__)

AlertSink = Callable[[Sequence[Alert]], None]
RecordSink = Callable[[str, Vector, int], None]
# Adds annotations to an alert element (e.g. the cost-spike checks); gets its labels and time.
Enricher = Callable[[dict[str, str], int], dict[str, str]]
# Sees each evaluated rule's firing instances (e.g. the scale advisor).
Observer = Callable[[Rule, list[AlertInstance], int], None]


@dataclass
class RuleHealth:
    health: str = "unknown"  # "ok" | "err" | "unknown"
    last_error: str = ""
    last_eval_ms: int = 0
    last_duration_s: float = 0.0
    last_samples: int = 0


@dataclass
class EngineMetrics:
    group_duration: Gauge
    rule_duration: Histogram
    failures: Counter
    evaluations: Counter
    alerts: Gauge
    health: Gauge

    @classmethod
    def register(cls, registry: CollectorRegistry) -> EngineMetrics:
        return cls(
            Gauge("infermeter_rule_group_last_duration_seconds", "Time of the last evaluation of a rule group.", ["group"], registry=registry),
            Histogram(
                "infermeter_rule_evaluation_duration_seconds",
                "Time to evaluate one rule.",
                ["group"],
                buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
                registry=registry,
            ),
            Counter("infermeter_rule_evaluation_failures_total", "Rule evaluations that failed.", ["group", "rule"], registry=registry),
            Counter("infermeter_rule_evaluations_total", "Rule evaluations.", ["group"], registry=registry),
            Gauge("infermeter_alerts", "Alerts by state.", ["state"], registry=registry),
            Gauge("infermeter_rule_health", "1 when the rule's last evaluation succeeded, 0 when it failed.",
                  ["group", "rule"], registry=registry),
        )


@dataclass
class RuleEngine:
    groups: list[RuleGroup]
    source: SampleSource
    clock: Clock
    registry: CollectorRegistry
    state_store: AlertStateStore | None = None
    sink: AlertSink | None = None
    record: RecordSink | None = None
    default_interval_ms: int = 60_000
    external_url: str = ""
    enrichers: dict[str, Enricher] = field(default_factory=dict)
    observers: list[Observer] = field(default_factory=list)
    # In an HA pair only the leader evaluates; the follower shows the leader's stored state.
    leadership: Leadership = ALONE
    states: dict[str, RuleState] = field(default_factory=dict)
    health: dict[str, RuleHealth] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _metrics: EngineMetrics | None = None

    def __post_init__(self) -> None:
        self._metrics = EngineMetrics.register(self.registry)
        self.set_groups(self.groups)

    # -- configuration -----------------------------------------------------------------------
    def set_groups(self, groups: list[RuleGroup]) -> None:
        """Install rules (at start or on reload), keeping the state of rules that remain."""
        saved = self.state_store.load() if self.state_store is not None and not self.states else {}
        with self._lock:
            states: dict[str, RuleState] = {}
            for group in groups:
                for rule in group.rules:
                    if rule.kind != "alert":
                        continue
                    state = self.states.get(rule.key) or RuleState(rule.for_ms, rule.keep_firing_for_ms)
                    state.for_ms, state.keep_firing_for_ms = rule.for_ms, rule.keep_firing_for_ms
                    if rule.key in saved:
                        state.instances = saved[rule.key]
                    states[rule.key] = state
            self.groups, self.states = list(groups), states
            self.health = {r.key: self.health.get(r.key, RuleHealth()) for g in groups for r in g.rules}

    def adopt_saved_state(self) -> None:
        """Replace every rule's instances with the stored ones: what a process that was handed
        the lead continues from (``for`` timers keep their start, firing alerts stay firing),
        and what a follower shows."""
        if self.state_store is None:
            return
        saved = self.state_store.load()
        with self._lock:
            for key, state in self.states.items():
                state.instances = saved.get(key, {})
                state.dropped = set()
        self._publish()

    def interval_ms(self, group: RuleGroup) -> int:
        return group.interval_ms or self.default_interval_ms

    # -- evaluation --------------------------------------------------------------------------
    def evaluate_group(self, group: RuleGroup, at_ms: int) -> list[Transition]:
        started = time.perf_counter()
        ctx = context_at(self.source, at_ms)
        transitions: list[Transition] = []
        for rule in group.rules:
            transitions.extend(self._evaluate_rule(rule, ctx, at_ms))
        assert self._metrics is not None
        self._metrics.group_duration.labels(group.name).set(time.perf_counter() - started)
        self._metrics.evaluations.labels(group.name).inc()
        self._publish()
        return transitions

    def evaluate_all(self, at_ms: int | None = None) -> list[Transition]:
        at = self.clock.now_ms() if at_ms is None else at_ms
        out: list[Transition] = []
        for group in list(self.groups):
            out.extend(self.evaluate_group(group, at))
        return out

    def _evaluate_rule(self, rule: Rule, ctx: EvalContext, at_ms: int) -> list[Transition]:
        started = time.perf_counter()
        health = self.health.setdefault(rule.key, RuleHealth())
        assert self._metrics is not None
        try:
            value = ctx.evaluate(rule.expr)
            vector = value if isinstance(value, Vector) else Vector([()], _scalar_array(value))
            if rule.kind == "record":
                if self.record is not None:
                    self.record(rule.name, vector, at_ms)
                transitions: list[Transition] = []
            else:
                transitions = self._step_alert(rule, vector, at_ms)
            health.health, health.last_error, health.last_samples = "ok", "", len(vector)
        except (ExprError, ArithmeticError, ValueError, KeyError, TypeError) as exc:
            message = exc.message if isinstance(exc, ExprError) else f"{type(exc).__name__}: {exc}"
            if health.last_error != message:  # log a new failure once, not every cycle
                log.warning("rule %s (%s) failed: %s", rule.key, rule.source, message)
            health.health, health.last_error = "err", message
            self._metrics.failures.labels(rule.group, rule.name).inc()
            transitions = []
        health.last_eval_ms = at_ms
        health.last_duration_s = time.perf_counter() - started
        self._metrics.health.labels(rule.group, rule.key.split("/", 1)[1]).set(1.0 if health.health == "ok" else 0.0)
        self._metrics.rule_duration.labels(rule.group).observe(health.last_duration_s)
        return transitions

    def _step_alert(self, rule: Rule, vector: Vector, at_ms: int) -> list[Transition]:
        enrich = self.enrichers.get(rule.name)
        results = []
        for labels, value in vector.as_dicts():
            labels.pop("__name__", None)
            labels.update({k: render(v, labels, value) for k, v in rule.labels.items()})
            labels["alertname"] = rule.name
            annotations = {k: render(v, labels, value) for k, v in rule.annotations.items()}
            if enrich is not None:
                annotations.update(enrich(labels, at_ms))
            results.append((labels, annotations, value))
        with self._lock:
            state = self.states[rule.key]
            transitions = state.step(at_ms, results)
            instances = dict(state.instances)
            dropped, state.dropped = state.dropped, set()
        if (transitions or dropped) and self.state_store is not None:
            self.state_store.save(rule.key, instances, transitions, dropped)
        firing = [i for i in instances.values() if i.state == FIRING]
        for observer in self.observers:
            observer(rule, firing, at_ms)
        if self.sink is not None:
            alerts = [i.to_alert(self.external_url) for i in instances.values() if i.state != PENDING]
            if alerts:
                self.sink(alerts)
        return transitions

    def _publish(self) -> None:
        assert self._metrics is not None
        counts = {"pending": 0, "firing": 0}
        with self._lock:
            for state in self.states.values():
                for inst in state.instances.values():
                    if inst.state in counts:
                        counts[inst.state] += 1
        for name, count in counts.items():
            self._metrics.alerts.labels(name).set(count)

    # -- views for the API -------------------------------------------------------------------
    def active(self) -> list[tuple[Rule, AlertInstance]]:
        by_key = {r.key: r for g in self.groups for r in g.rules}
        with self._lock:
            return [
                (by_key[key], inst)
                for key, state in self.states.items()
                if key in by_key
                for inst in state.instances.values()
            ]

    # -- the loop ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rules", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        # Each group runs on its own grid (multiples of its interval), like Prometheus: the
        # evaluation instants are the same whoever starts the process.
        due: dict[str, int] = {}
        term = self.leadership.term()
        while not self._stop.is_set():
            now = self.clock.now_ms()
            current = self.leadership.term()
            if current != term:  # led elsewhere meanwhile: continue from what was stored
                term = current
                due.clear()
                self._adopt_quietly()
            if not current:  # following: keep the leader's stored state in view
                self._stop.wait(self.default_interval_ms / 1000 / 4)
                if self.leadership.term() == 0:
                    self._adopt_quietly()
                continue
            for group in list(self.groups):
                interval = self.interval_ms(group)
                if now >= due.get(group.name, 0):
                    try:
                        self.evaluate_group(group, now // interval * interval)
                    except NotLeader as exc:  # deposed mid-cycle: the next pass sees the new role
                        log.info("rule group %s not stored: %s", group.name, exc)
                    except Exception:  # a broken group must not stop the others
                        log.exception("rule group %s failed", group.name)
                    due[group.name] = (now // interval + 1) * interval
            wake = min(due.values(), default=now + 1000)
            self._stop.wait(max(0.05, min(1.0, (wake - self.clock.now_ms()) / 1000)))


    def _adopt_quietly(self) -> None:
        try:
            self.adopt_saved_state()
        except Exception as exc:  # the database is away: the next pass tries again
            log.warning("could not load the stored alert state: %s", exc)


def _scalar_array(value: float | str) -> np.ndarray:
    number = float(value) if not isinstance(value, str) else math.nan
    return np.asarray([number])
