"""Whether a group's flush becomes a notification: a pure decision with a named reason.

Mirrors Alertmanager's DedupStage (``needsUpdate``) over the notification log entry of one
integration and group, with one refinement: a resolved alert is reported only to a receiver
that was told it was firing, so a receiver never hears "resolved" about something it never saw.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from enum import Enum


class Reason(str, Enum):
    # notify
    FIRST = "first notification"
    NEW_ALERTS = "new alerts added"
    SOME_RESOLVED = "some alerts resolved"
    ALL_RESOLVED = "all alerts resolved"
    REPEAT = "repeat interval elapsed"
    # skip
    NOTHING_FIRING = "nothing firing"
    NO_CHANGE = "no change"


@dataclass(frozen=True)
class LogEntry:
    """What one integration was last told about one group."""

    sent_ms: int
    firing: frozenset[str]
    resolved: frozenset[str]


@dataclass(frozen=True)
class Decision:
    notify: bool
    reason: Reason


def decide(
    entry: LogEntry | None,
    firing: Set[str],
    resolved: Set[str],
    *,
    now_ms: int,
    repeat_ms: int,
    send_resolved: bool,
) -> Decision:
    """``firing``/``resolved``: fingerprints of the group's unmuted firing and its resolved alerts."""
    if entry is None:
        return Decision(True, Reason.FIRST) if firing else Decision(False, Reason.NOTHING_FIRING)
    if not firing <= entry.firing:
        return Decision(True, Reason.NEW_ALERTS)
    if not firing:
        # Everything the receiver knew as firing is gone (resolved or muted): clear it, even
        # without send_resolved, so the log forgets them and a re-fire counts as new.
        return Decision(True, Reason.ALL_RESOLVED) if entry.firing else Decision(False, Reason.NOTHING_FIRING)
    if send_resolved and (resolved & entry.firing) - entry.resolved:
        return Decision(True, Reason.SOME_RESOLVED)
    if now_ms - entry.sent_ms >= repeat_ms:
        return Decision(True, Reason.REPEAT)
    return Decision(False, Reason.NO_CHANGE)


def reported_resolved(entry: LogEntry | None, resolved: Set[str]) -> frozenset[str]:
    """The resolved alerts worth telling this integration about: those it was told were firing."""
    if entry is None:
        return frozenset()
    return frozenset(resolved & entry.firing)
