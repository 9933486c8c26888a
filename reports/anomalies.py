"""The period's cost anomalies, read from the alert history: every time ``CostPerTokenSpike`` or
``TokenCostOverBudget`` went to firing, when it resolved, and the three checks of seed 000 §4.2
that the rules engine attached to it (``check_utilization``, ``check_request_mix``,
``check_autoscaling``).

The history table (``alert_events``) keeps each transition's annotations. Rows written before it
did fall back to the alert's state row (``alert_state``, kept while it is pending, firing or
recently resolved) and the notification pipeline (``notify_alerts``); an anomaly whose annotations
are gone from all three is reported with its value and times and a note saying the checks are no
longer on record.

Reads tables only; imports the table definitions, not the rules engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy import Engine

from alerts.notify.schema import alerts as notify_alerts
from alerts.schema import alert_events, alert_state
from reports.model import Anomaly

COST_ALERTS = ("CostPerTokenSpike", "TokenCostOverBudget")
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
MISSING_CHECKS = "checks no longer on record (annotations are kept only while an alert is active or being notified)"


def rule_name(rule_key: str) -> str:
    """``infermeter-cost/CostPerTokenSpike#2`` -> ``CostPerTokenSpike``."""
    return rule_key.split("/", 1)[-1].split("#", 1)[0]


def _loads(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def rank(anomalies: Iterable[Anomaly]) -> list[Anomaly]:
    """Most severe first, then the highest cost per 1M tokens, then the earliest."""
    return sorted(
        anomalies,
        key=lambda a: (SEVERITY_RANK.get(a.severity, 3), -(a.value if a.value is not None else float("-inf")), a.fired_at_ms),
    )


class AlertHistoryAnomalies:
    """An :data:`reports.model.AnomalySource` over the alert tables of ``engine``."""

    def __init__(self, engine: Engine, alert_names: Iterable[str] = COST_ALERTS) -> None:
        self.engine = engine
        self.names = tuple(alert_names)

    def __call__(self, start_ms: int, end_ms: int, limit: int) -> list[Anomaly]:
        likes = [alert_events.c.rule_key.like(f"%/{n}") for n in self.names]
        likes += [alert_events.c.rule_key.like(f"%/{n}#%") for n in self.names]
        fired_q = (
            sa.select(alert_events)
            .where(alert_events.c.at_ms >= start_ms, alert_events.c.at_ms < end_ms,
                   alert_events.c.to_state == "firing", sa.or_(*likes))
            .order_by(alert_events.c.at_ms)
        )
        with self.engine.connect() as conn:
            fired = [r for r in conn.execute(fired_q) if rule_name(r.rule_key) in self.names]
            if not fired:
                return []
            prints = sorted({r.fingerprint for r in fired})
            ends = self._ends(conn, prints, fired[0].at_ms)
            state = {
                (r.rule_key, r.fingerprint): _loads(r.annotations)
                for r in conn.execute(sa.select(alert_state.c.rule_key, alert_state.c.fingerprint, alert_state.c.annotations)
                                      .where(alert_state.c.fingerprint.in_(prints)))
            }
            pipeline = {
                r.fingerprint: _loads(r.annotations)
                for r in conn.execute(sa.select(notify_alerts.c.fingerprint, notify_alerts.c.annotations)
                                      .where(notify_alerts.c.fingerprint.in_(prints)))
            }
        out = []
        for r in fired:
            labels = _loads(r.labels)
            annotations = (
                _loads(r.annotations) or state.get((r.rule_key, r.fingerprint)) or pipeline.get(r.fingerprint) or {}
            )
            checks = {k: v for k, v in sorted(annotations.items()) if k.startswith("check_")}
            resolved = next((t for t in ends.get(r.fingerprint, []) if t > r.at_ms), None)
            out.append(Anomaly(
                alertname=labels.get("alertname", rule_name(r.rule_key)),
                severity=labels.get("severity", ""),
                fired_at_ms=int(r.at_ms),
                resolved_at_ms=resolved,
                value=float(r.value) if r.value is not None else None,
                labels=labels,
                summary=annotations.get("summary", ""),
                checks=checks,
                checks_note="" if checks else MISSING_CHECKS,
            ))
        return rank(out)[: max(0, limit)]

    @staticmethod
    def _ends(conn: sa.Connection, prints: list[str], since_ms: int) -> dict[str, list[int]]:
        query = (
            sa.select(alert_events.c.fingerprint, alert_events.c.at_ms)
            .where(alert_events.c.fingerprint.in_(prints), alert_events.c.at_ms > since_ms,
                   alert_events.c.to_state.in_(("resolved", "inactive")))
            .order_by(alert_events.c.at_ms)
        )
        ends: dict[str, list[int]] = {}
        for fp, at in conn.execute(query):
            ends.setdefault(fp, []).append(int(at))
        return ends
