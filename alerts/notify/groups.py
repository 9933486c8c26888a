"""The notification pipeline's model of what it holds: alerts (:class:`Held`), aggregation groups
(:class:`Group`), a flush's plan (:class:`Plan`), the silenced/inhibited decision of a tick
(:class:`Mutes`), and Alertmanager's notion of a change and of order within a notification."""

from __future__ import annotations

from dataclasses import dataclass, field

from alerts.model import Alert
from alerts.notify.dedup import LogEntry
from alerts.notify.inhibit import Inhibitor
from alerts.notify.outbox import OutboxRow
from alerts.notify.routing import Route
from alerts.notify.silences import SilenceStore

GroupId = tuple[str, str]  # (route id, group key)


@dataclass
class Held:
    alert: Alert
    last_seen_ms: int
    groups: set[GroupId] = field(default_factory=set)


@dataclass
class Group:
    route: Route
    key: str
    labels: dict[str, str]
    members: set[str] = field(default_factory=set)
    next_flush_ms: int = 0
    flushed: bool = False


@dataclass
class Plan:
    rows: list[OutboxRow] = field(default_factory=list)
    log: list[tuple[str, str, LogEntry]] = field(default_factory=list)
    flushed: list[tuple[Group, set[str]]] = field(default_factory=list)  # group, resolved fps it drops


class Mutes:
    """Silenced or inhibited, decided once per alert per tick."""

    def __init__(self, silences: SilenceStore, inhibitor: Inhibitor, now_ms: int) -> None:
        self._silences, self._inhibitor, self._now = silences, inhibitor, now_ms
        self._cache: dict[str, str | None] = {}

    def why(self, alert: Alert) -> str | None:
        if alert.fingerprint not in self._cache:
            reason = None
            if self._silences.muted_by(alert.labels, self._now):
                reason = "silenced"
            elif self._inhibitor.muted(alert):
                reason = "inhibited"
            self._cache[alert.fingerprint] = reason
        return self._cache[alert.fingerprint]


def same_news(a: Alert, b: Alert) -> bool:
    """Equal for notification purposes (the sampled value alone changing is not news)."""
    return (
        a.status == b.status and a.starts_at_ms == b.starts_at_ms and a.ends_at_ms == b.ends_at_ms
        and a.labels == b.labels and a.annotations == b.annotations and a.generator_url == b.generator_url
    )


def notification_order(a: Alert) -> tuple[str, str, int, tuple[tuple[str, str], ...]]:
    """Alertmanager's order of alerts in a notification: job, instance, start, labels."""
    return (a.labels.get("job", ""), a.labels.get("instance", ""), a.starts_at_ms, tuple(sorted(a.labels.items())))
