"""Scale recommendations from the queue rules (seed 000 §2.2): a firing rule labelled
``action="add_instance"`` or ``"remove_instance"`` yields one action event per scope per cooldown
(300 s), keeping the recommended group size within bounds (2..16).

The advisor does not start machines; it records what should happen (``scale_events`` table,
``infermeter_scale_recommendations_total``) so an autoscaler or a person can act, and so the
cost-spike check can tell whether the last recommendation was acted on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy import Engine

from alerts.rulefile import Rule
from alerts.schema import scale_events
from alerts.state import AlertInstance

ACTIONS = ("add_instance", "remove_instance")


@dataclass(frozen=True)
class ScaleEvent:
    at_ms: int
    scope: str
    action: str
    from_instances: int
    to_instances: int
    reason: str


@dataclass
class ScaleAdvisor:
    cooldown_ms: int
    min_instances: int
    max_instances: int
    # Instances serving a scope now (e.g. distinct `instance` labels of the model's series).
    count_instances: Callable[[str, int], int]
    registry: CollectorRegistry
    engine: Engine | None = None
    recommended: dict[str, int] = field(default_factory=dict)
    last_action_ms: dict[str, int] = field(default_factory=dict)
    events: list[ScaleEvent] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._counter = Counter(
            "infermeter_scale_recommendations_total", "Scale actions recommended.", ["scope", "action"], registry=self.registry
        )
        self._target = Gauge(
            "infermeter_scale_recommended_instances", "Recommended instances per scope.", ["scope"], registry=self.registry
        )
        if self.engine is not None:
            self._restore()

    def _restore(self) -> None:
        assert self.engine is not None
        query = sa.select(scale_events).order_by(scale_events.c.at_ms)
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                self.recommended[row.scope] = row.to_instances
                self.last_action_ms[row.scope] = row.at_ms
                self.events.append(
                    ScaleEvent(row.at_ms, row.scope, row.action, row.from_instances, row.to_instances, row.reason)
                )
        self.events = self.events[-1000:]

    def observe(self, rule: Rule, firing: list[AlertInstance], at_ms: int) -> None:
        action = rule.labels.get("action")
        if action not in ACTIONS:
            return
        for inst in firing:
            scope = inst.labels.get("model") or "fleet"
            self._consider(scope, action, at_ms, f"{rule.name}: value {inst.value:g}")

    def _consider(self, scope: str, action: str, at_ms: int, reason: str) -> ScaleEvent | None:
        with self._lock:
            last = self.last_action_ms.get(scope)
            if last is not None and at_ms - last < self.cooldown_ms:
                return None
            current = self.recommended.get(scope) or self.count_instances(scope, at_ms)
            current = min(max(current, self.min_instances), self.max_instances)
            target = current + 1 if action == "add_instance" else current - 1
            target = min(max(target, self.min_instances), self.max_instances)
            if target == current:
                return None  # at a bound: nothing to recommend
            event = ScaleEvent(at_ms, scope, action, current, target, reason)
            self.recommended[scope] = target
            self.last_action_ms[scope] = at_ms
            self.events.append(event)
        self._counter.labels(scope, action).inc()
        self._target.labels(scope).set(target)
        if self.engine is not None:
            with self.engine.begin() as conn:
                conn.execute(sa.insert(scale_events), [event.__dict__])
        return event

    def last_event(self, scope: str) -> ScaleEvent | None:
        with self._lock:
            for event in reversed(self.events):
                if event.scope == scope:
                    return event
        return None
