"""Alert state and history in the database, so `for` timers and firing alerts survive restarts."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy import Engine

from alerts.schema import alert_events, alert_state
from alerts.state import AlertInstance, Transition


class AlertStateStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def load(self) -> dict[str, dict[str, AlertInstance]]:
        """rule key → fingerprint → instance, as last saved."""
        out: dict[str, dict[str, AlertInstance]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(sa.select(alert_state)):
                inst = AlertInstance(
                    labels=json.loads(row.labels),
                    annotations=json.loads(row.annotations),
                    state=row.state,
                    active_at_ms=row.active_at_ms,
                    value=row.value if row.value is not None else float("nan"),
                    last_eval_ms=row.last_eval_ms,
                    fired_at_ms=row.fired_at_ms,
                    resolved_at_ms=row.resolved_at_ms,
                    keep_firing_since_ms=row.keep_firing_since_ms,
                    fingerprint=row.fingerprint,
                )
                out.setdefault(row.rule_key, {})[row.fingerprint] = inst
        return out

    def save(
        self,
        rule_key: str,
        instances: dict[str, AlertInstance],
        transitions: list[Transition],
        dropped: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """Write the rows of the label sets that changed state (insert, replace or drop) and
        append the transitions, in one transaction. Only transitions touch the database, and
        only their rows: a rule with thousands of steady alerts costs nothing per cycle."""
        changed = sorted({t.fingerprint for t in transitions} | set(dropped))
        rows = [_row(rule_key, fp, instances[fp]) for fp in changed if fp in instances]
        events = [
            {
                "at_ms": t.at_ms,
                "rule_key": rule_key,
                "fingerprint": t.fingerprint,
                "labels": json.dumps(dict(t.labels), sort_keys=True),
                "from_state": t.from_state,
                "to_state": t.to_state,
                "value": t.value if t.value == t.value else None,
                "annotations": json.dumps(dict(t.annotations), sort_keys=True),
            }
            for t in transitions
        ]
        with self.engine.begin() as conn:
            for i in range(0, len(changed), 500):
                conn.execute(
                    sa.delete(alert_state).where(
                        alert_state.c.rule_key == rule_key, alert_state.c.fingerprint.in_(changed[i : i + 500])
                    )
                )
            if rows:
                conn.execute(sa.insert(alert_state), rows)
            if events:
                conn.execute(sa.insert(alert_events), events)

    def history(self, since_ms: int, limit: int = 1000) -> list[dict[str, object]]:
        query = (
            sa.select(alert_events)
            .where(alert_events.c.at_ms >= since_ms)
            .order_by(alert_events.c.at_ms.desc(), alert_events.c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [
                {
                    "at_ms": r.at_ms,
                    "rule": r.rule_key,
                    "fingerprint": r.fingerprint,
                    "labels": json.loads(r.labels),
                    "from": r.from_state,
                    "to": r.to_state,
                    "value": r.value,
                }
                for r in conn.execute(query)
            ]


def _row(rule_key: str, fp: str, inst: AlertInstance) -> dict[str, object]:
    return {
        "rule_key": rule_key,
        "fingerprint": fp,
        "labels": json.dumps(inst.labels, sort_keys=True),
        "annotations": json.dumps(inst.annotations, sort_keys=True),
        "state": inst.state,
        "active_at_ms": inst.active_at_ms,
        "fired_at_ms": inst.fired_at_ms,
        "resolved_at_ms": inst.resolved_at_ms,
        "keep_firing_since_ms": inst.keep_firing_since_ms,
        "last_eval_ms": inst.last_eval_ms,
        "value": inst.value if inst.value == inst.value else None,
    }
