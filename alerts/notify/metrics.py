"""Delivery metrics, registered on the registry the composition root passes in."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)


class NotifyMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.enqueued = Counter(
            "infermeter_notify_enqueued", "Notifications written to the outbox.", ["integration"], registry=registry
        )
        self.sent = Counter(
            "infermeter_notify_sent", "Notifications delivered (2xx).", ["integration"], registry=registry
        )
        self.failed = Counter(
            "infermeter_notify_failed",
            "Notifications given up on, by reason (http_4xx, http_3xx, expired, unknown_integration).",
            ["integration", "reason"],
            registry=registry,
        )
        self.retries = Counter(
            "infermeter_notify_retries",
            "Failed attempts scheduled for a retry, by reason (connect, timeout, http_5xx, http_429, ...).",
            ["integration", "reason"],
            registry=registry,
        )
        self.outbox_depth = Gauge(
            "infermeter_notify_outbox_depth", "Notifications in the outbox not yet delivered.", registry=registry
        )
        self.latency = Histogram(
            "infermeter_notify_delivery_latency_seconds",
            "From entering the outbox to delivery, retries included.",
            ["integration"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.alerts = Gauge(
            "infermeter_notify_alerts",
            "Alerts held by the notification pipeline, by state (firing, resolved, silenced, inhibited).",
            ["state"],
            registry=registry,
        )
        self.groups = Gauge("infermeter_notify_groups", "Active aggregation groups.", registry=registry)
        for state in ("firing", "resolved", "silenced", "inhibited"):
            self.alerts.labels(state).set(0)
