"""Rendering one group notification into the body each kind of receiver expects (pure functions).

Bodies are rendered once, when the notification enters the outbox, so every retry of one
notification id carries byte-identical content (receivers may de-duplicate on the id, or hash
the body). Times are RFC 3339 in UTC; a firing alert's ``endsAt`` in the webhook payload is
Go's zero time ``0001-01-01T00:00:00Z``, exactly as Alertmanager writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from alerts.model import Alert

ZERO_TIME = "0001-01-01T00:00:00Z"


def rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Notification:
    receiver: str
    group_key: str
    group_labels: Mapping[str, str]
    alerts: Sequence[Alert]  # firing first, then resolved; each by job, instance, start, labels
    external_url: str
    reason: str
    now_ms: int

    @property
    def status(self) -> str:
        return "firing" if any(a.status == "firing" for a in self.alerts) else "resolved"

    @property
    def firing(self) -> list[Alert]:
        return [a for a in self.alerts if a.status == "firing"]


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    common = dict(maps[0])
    for other in maps[1:]:
        common = {k: v for k, v in common.items() if other.get(k) == v}
    return dict(sorted(common.items()))


def webhook_body(n: Notification, max_alerts: int = 0) -> str:
    """Alertmanager's webhook message, version 4 (``notify/webhook/webhook.go``)."""
    shown = list(n.alerts) if max_alerts <= 0 else list(n.alerts)[:max_alerts]
    message = {
        "version": "4",
        "groupKey": n.group_key,
        "truncatedAlerts": len(n.alerts) - len(shown),
        "status": n.status,
        "receiver": n.receiver,
        "groupLabels": dict(sorted(n.group_labels.items())),
        "commonLabels": _common([a.labels for a in n.alerts]),
        "commonAnnotations": _common([a.annotations for a in n.alerts]),
        "externalURL": n.external_url,
        "notification_reason": n.reason,
        "alerts": [
            {
                "status": a.status,
                "labels": dict(sorted(a.labels.items())),
                "annotations": dict(sorted(a.annotations.items())),
                "startsAt": rfc3339(a.starts_at_ms),
                "endsAt": rfc3339(a.ends_at_ms) if a.status == "resolved" and a.ends_at_ms is not None else ZERO_TIME,
                "generatorURL": a.generator_url,
                "fingerprint": a.fingerprint,
            }
            for a in shown
        ],
    }
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def alertmanager_body(n: Notification, valid_for_ms: int) -> str:
    """``POST /api/v2/alerts`` body: postable alerts. Firing ones end ``valid_for_ms`` from now
    unless pushed again (so a stopped service's alerts resolve on their own); resolved ones
    carry their real end, which Alertmanager takes as the resolution."""
    body = []
    for a in n.alerts:
        ends = n.now_ms + valid_for_ms if a.status == "firing" else (a.ends_at_ms or n.now_ms)
        item: dict[str, object] = {
            "labels": dict(sorted(a.labels.items())),
            "annotations": dict(sorted(a.annotations.items())),
            "startsAt": rfc3339(a.starts_at_ms),
            "endsAt": rfc3339(ends),
        }
        if a.generator_url:
            item["generatorURL"] = a.generator_url
        body.append(item)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def slack_text(n: Notification) -> str:
    firing = len(n.firing)
    head = f"[{n.status.upper()}{f':{firing}' if firing else ''}] "
    head += " ".join(v for _, v in sorted(n.group_labels.items())) or n.receiver
    lines = [head]
    for a in n.alerts:
        detail = a.annotations.get("summary") or a.annotations.get("description") or ""
        where = ", ".join(f"{k}={v}" for k, v in sorted(a.labels.items()) if k not in ("alertname", "severity"))
        severity = a.labels.get("severity", "")
        line = f"• {'🔥' if a.status == 'firing' else '✅'} *{a.name or 'alert'}*"
        line += f" `{severity}`" if severity else ""
        line += f" ({where})" if where else ""
        line += f": {detail}" if detail else ""
        runbook = a.annotations.get("runbook_url") or a.annotations.get("runbook")
        if runbook and runbook.startswith(("http://", "https://")):
            line += f" <{runbook}|runbook>"
        lines.append(line)
    if n.external_url:
        lines.append(f"<{n.external_url}|open infermeter>")
    return "\n".join(lines)


def slack_body(n: Notification, channel: str | None = None, username: str | None = None) -> str:
    message: dict[str, object] = {"text": slack_text(n)}
    if channel:
        message["channel"] = channel
    if username:
        message["username"] = username
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))
