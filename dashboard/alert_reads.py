"""Alerts, their history, silences, scale recommendations and rule health, as table rows.

Filters apply to alert labels: a model filter keeps alerts whose ``model`` label is selected,
a node filter keeps alerts whose ``host`` / ``node`` label, or ``instance``'s node, is selected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dashboard.model import AlertRow
from dashboard.queries import Filters
from dashboard.sources import Sources

STATE_ORDER = {"firing": 0, "pending": 1, "resolved": 2}
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def alert_matches(labels: Mapping[str, str], filters: Filters, node_of: Callable[[str], str]) -> bool:
    if filters.models and labels.get("model") not in filters.models:
        return False
    if filters.nodes:
        node = labels.get("host") or labels.get("node") or (node_of(labels["instance"]) if labels.get("instance") else "")
        if node not in filters.nodes:
            return False
    return True


def active_alerts(sources: Sources, filters: Filters, now_ms: int) -> list[AlertRow] | None:
    """Firing, pending and recently resolved alerts (marked when a silence mutes them); None
    when no rules engine runs."""
    if sources.rules is None:
        return None
    silences = sources.silences
    rows = []
    for rule, inst in sources.rules.active():
        if not alert_matches(inst.labels, filters, sources.node_of):
            continue
        since = inst.resolved_at_ms if inst.state == "resolved" and inst.resolved_at_ms else inst.fired_at_ms or inst.active_at_ms
        rows.append(AlertRow(
            name=rule.name, state=inst.state, severity=inst.labels.get("severity", ""), since_ms=int(since),
            summary=inst.annotations.get("summary", "") or inst.annotations.get("description", ""),
            runbook=inst.annotations.get("runbook", ""), labels=dict(inst.labels), value=float(inst.value),
            silenced=bool(silences.muted_by(inst.labels, now_ms)) if silences is not None else False,
        ))
    rows.sort(key=lambda r: (STATE_ORDER.get(r.state, 9), SEVERITY_ORDER.get(r.severity, 9), -r.since_ms, r.name))
    return rows


def history_rows(sources: Sources, since_ms: int, filters: Filters, limit: int = 300) -> list[dict[str, object]] | None:
    if sources.history is None:
        return None
    out = []
    for row in sources.history.history(since_ms, limit=limit * 4 if filters.active else limit):
        labels = row.get("labels")
        if isinstance(labels, Mapping) and not alert_matches(labels, filters, sources.node_of):
            continue
        out.append(row)
        if len(out) >= limit:
            break
    return out


def silence_rows(sources: Sources, now_ms: int) -> list[dict[str, object]] | None:
    if sources.silences is None:
        return None
    rows = []
    for s in sources.silences.all():
        rows.append({
            "id": s.id, "matchers": ", ".join(f'{m.name}{m.op}"{m.value}"' for m in s.matchers), "state": s.state(now_ms),
            "starts_at_ms": s.starts_at_ms, "ends_at_ms": s.ends_at_ms, "created_by": s.created_by, "comment": s.comment,
        })
    order = {"active": 0, "pending": 1, "expired": 2}
    rows.sort(key=lambda r: (order.get(str(r["state"]), 9), -int(r["ends_at_ms"])))  # type: ignore[call-overload]
    return rows


def scale_rows(sources: Sources, since_ms: int, filters: Filters) -> list[dict[str, object]] | None:
    if sources.advisor is None:
        return None
    events = [e for e in list(sources.advisor.events) if e.at_ms >= since_ms]
    if filters.models:
        events = [e for e in events if e.scope in filters.models]
    return [e.__dict__ for e in reversed(events[-100:])]


def rule_problems(sources: Sources) -> list[dict[str, object]] | None:
    if sources.rules is None:
        return None
    return [
        {"rule": key, "error": h.last_error, "last_eval_ms": h.last_eval_ms}
        for key, h in sorted(sources.rules.health.items())
        if h.health == "err"
    ]


__all__ = ["active_alerts", "history_rows", "silence_rows", "scale_rows", "rule_problems", "alert_matches"]
