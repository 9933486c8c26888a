"""The alert state machine of one rule: inactive → pending → firing → resolved.

Pure and clock-free: each :meth:`RuleState.step` gets the evaluation time and the elements the
expression returned, and reports the transitions it made. ``for`` counts from the time an
element first appeared (``active_at``), which is persisted, so a restart does not reset it;
``keep_firing_for`` holds a firing alert after its condition clears. Resolved alerts are kept
for ``resolved_retention_ms`` so notification can still send their resolution.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from alerts.model import Alert, fingerprint

INACTIVE, PENDING, FIRING, RESOLVED = "inactive", "pending", "firing", "resolved"
RESOLVED_RETENTION_MS = 15 * 60_000  # as Prometheus: resolved alerts are re-sent for 15 min


@dataclass
class AlertInstance:
    labels: dict[str, str]
    annotations: dict[str, str]
    state: str
    active_at_ms: int
    value: float
    last_eval_ms: int
    fired_at_ms: int | None = None
    resolved_at_ms: int | None = None
    keep_firing_since_ms: int | None = None
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = fingerprint(self.labels)

    def to_alert(self, generator_url: str = "") -> Alert:
        return Alert(
            labels=dict(self.labels),
            annotations=dict(self.annotations),
            status="resolved" if self.state == RESOLVED else "firing",
            starts_at_ms=self.fired_at_ms or self.active_at_ms,
            ends_at_ms=self.resolved_at_ms,
            generator_url=generator_url,
            value=self.value,
            fingerprint=self.fingerprint,
        )


@dataclass(frozen=True)
class Transition:
    fingerprint: str
    labels: Mapping[str, str]
    from_state: str
    to_state: str
    at_ms: int
    value: float
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass
class RuleState:
    for_ms: int
    keep_firing_for_ms: int = 0
    resolved_retention_ms: int = RESOLVED_RETENTION_MS
    instances: dict[str, AlertInstance] = field(default_factory=dict)
    # Resolved label sets forgotten after their retention, not yet removed from storage.
    dropped: set[str] = field(default_factory=set)

    def step(
        self, now_ms: int, results: list[tuple[dict[str, str], dict[str, str], float]]
    ) -> list[Transition]:
        """Advance to ``now_ms``; ``results`` holds (alert labels, rendered annotations, value)."""
        changes: list[Transition] = []

        def move(inst: AlertInstance, to: str) -> None:
            changes.append(
                Transition(inst.fingerprint, dict(inst.labels), inst.state, to, now_ms, inst.value, dict(inst.annotations))
            )
            inst.state = to

        seen: set[str] = set()
        for labels, rendered, value in results:
            fp = fingerprint(labels)
            if fp in seen:
                continue  # duplicates after templating; the first one wins
            seen.add(fp)
            inst = self.instances.get(fp)
            if inst is None or inst.state == RESOLVED:
                inst = AlertInstance(labels, rendered, INACTIVE, now_ms, value, now_ms, fingerprint=fp)
                self.instances[fp] = inst
                move(inst, PENDING)
            inst.value, inst.annotations, inst.last_eval_ms = value, rendered, now_ms
            inst.keep_firing_since_ms = None
            if inst.state == PENDING and now_ms - inst.active_at_ms >= self.for_ms:
                inst.fired_at_ms = now_ms
                move(inst, FIRING)
        for fp, inst in list(self.instances.items()):
            if fp in seen:
                continue
            if inst.state == PENDING:
                move(inst, INACTIVE)
                del self.instances[fp]
            elif inst.state == FIRING:
                if self.keep_firing_for_ms > 0:
                    if inst.keep_firing_since_ms is None:
                        inst.keep_firing_since_ms = now_ms
                    if now_ms - inst.keep_firing_since_ms < self.keep_firing_for_ms:
                        continue
                inst.resolved_at_ms = now_ms
                move(inst, RESOLVED)
            elif inst.state == RESOLVED and now_ms - (inst.resolved_at_ms or now_ms) >= self.resolved_retention_ms:
                del self.instances[fp]
                self.dropped.add(fp)
        return changes

    def alerts(self, generator_url: str = "") -> list[Alert]:
        """What notification receives: firing alerts and recently resolved ones."""
        return [i.to_alert(generator_url) for i in self.instances.values() if i.state in (FIRING, RESOLVED)]
