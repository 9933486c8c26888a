"""Alerts and rules in the shape of Prometheus's HTTP API, plus history and scale actions."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException
from starlette.concurrency import run_in_threadpool

from infermeter.api.deps import PrincipalDep, RuntimeDep
from infermeter.api.params import parse_time_ms
from infermeter.runtime import Runtime

router = APIRouter(prefix="/api/v1", tags=["alerts"])


def _rfc3339(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _value(v: float) -> str:
    return "NaN" if math.isnan(v) else repr(float(v))


def _alerting(runtime: Runtime) -> Any:
    if runtime.alerting is None:
        raise HTTPException(503, "the rules engine is not running")
    return runtime.alerting


@router.get("/alerts")
async def alerts(runtime: RuntimeDep, _auth: PrincipalDep) -> dict[str, Any]:
    """Pending and firing alerts (Prometheus's /api/v1/alerts shape), with resolved ones kept
    for notification listed under ``resolved``."""
    engine = _alerting(runtime).rules
    out, resolved = [], []
    for rule, inst in engine.active():
        item = {
            "labels": inst.labels,
            "annotations": inst.annotations,
            "state": inst.state,
            "activeAt": _rfc3339(inst.active_at_ms),
            "firedAt": _rfc3339(inst.fired_at_ms),
            "value": _value(inst.value),
            "rule": rule.key,
        }
        if inst.state == "resolved":
            resolved.append({**item, "resolvedAt": _rfc3339(inst.resolved_at_ms)})
        else:
            out.append(item)
    return {"status": "success", "data": {"alerts": out, "resolved": resolved}}


@router.get("/rules")
async def rules(runtime: RuntimeDep, _auth: PrincipalDep, type: str | None = None) -> dict[str, Any]:  # noqa: A002
    """Rule groups with each rule's health, last error and evaluation time, in the shape of
    Prometheus's /api/v1/rules (Grafana's alerting view reads it); ``type=alert|record``."""
    engine = _alerting(runtime).rules
    active: dict[str, list[dict[str, Any]]] = {}
    for rule, inst in engine.active():
        active.setdefault(rule.key, []).append(
            {"labels": inst.labels, "annotations": inst.annotations, "state": inst.state,
             "activeAt": _rfc3339(inst.active_at_ms), "value": _value(inst.value)}
        )
    groups = []
    for group in engine.groups:
        items = []
        for rule in group.rules:
            if type in ("alert", "record") and (rule.kind == "alert") != (type == "alert"):
                continue
            health = engine.health.get(rule.key)
            item: dict[str, Any] = {
                "name": rule.name,
                "query": rule.expr_text,
                "labels": rule.labels,
                "health": health.health if health else "unknown",
                "lastError": health.last_error if health else "",
                "lastEvaluation": _rfc3339(health.last_eval_ms) if health and health.last_eval_ms else None,
                "evaluationTime": health.last_duration_s if health else 0.0,
                "type": "alerting" if rule.kind == "alert" else "recording",
                "source": rule.source,
            }
            if rule.kind == "alert":
                states = [a["state"] for a in active.get(rule.key, [])]
                item.update(
                    duration=rule.for_ms / 1000,
                    keepFiringFor=rule.keep_firing_for_ms / 1000,
                    annotations=rule.annotations,
                    alerts=active.get(rule.key, []),
                    state="firing" if "firing" in states else "pending" if "pending" in states else "inactive",
                )
            items.append(item)
        groups.append({"name": group.name, "file": group.file, "interval": engine.interval_ms(group) / 1000, "rules": items})
    return {"status": "success", "data": {"groups": groups}}


@router.get("/alerts/history")
async def history(runtime: RuntimeDep, _auth: PrincipalDep, since: str | None = None, limit: int = 1000) -> dict[str, Any]:
    """Alert state transitions, newest first."""
    now = runtime.clock.now_ms()
    since_ms = parse_time_ms("since", since, now, now - 86_400_000)
    rows = await run_in_threadpool(_alerting(runtime).state_store.history, since_ms, max(1, min(limit, 10_000)))
    for row in rows:
        row["at"] = _rfc3339(int(row.pop("at_ms")))
    return {"status": "success", "data": rows}


@router.get("/scale/events")
async def scale_events(runtime: RuntimeDep, _auth: PrincipalDep) -> dict[str, Any]:
    """Scale-out / scale-in recommendations (one per scope per cooldown)."""
    advisor = _alerting(runtime).advisor
    events = [
        {**e.__dict__, "at": _rfc3339(e.at_ms)} for e in advisor.events
    ]
    return {"status": "success", "data": {"events": events, "recommended": advisor.recommended}}
