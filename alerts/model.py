"""What the rules engine hands to notification: one alert instance, in Alertmanager's terms.

The rules engine produces these on every evaluation for alerts that are firing or have just
resolved; the notification pipeline groups, silences, inhibits and delivers them. Times are
Unix milliseconds (the store's unit); receivers render them as RFC 3339.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

AlertStatus = Literal["firing", "resolved"]


def fingerprint(labels: Mapping[str, str]) -> str:
    """A stable id for a label set (sorted name=value pairs, SHA-256, 16 hex digits)."""
    text = "\x00".join(f"{k}\x01{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Alert:
    labels: Mapping[str, str]  # includes alertname and severity
    annotations: Mapping[str, str]  # summary, description, runbook, ...
    status: AlertStatus
    starts_at_ms: int
    ends_at_ms: int | None = None  # set when resolved
    generator_url: str = ""
    value: float | None = None
    fingerprint: str = field(default="")

    def __post_init__(self) -> None:
        if not self.fingerprint:
            object.__setattr__(self, "fingerprint", fingerprint(self.labels))

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")
