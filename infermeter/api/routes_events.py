"""Deploy and config-change markers, and the comparison of the windows around one, over HTTP.

``POST /api/v1/events`` needs an operator (access.policy), ``DELETE`` an admin; both are audited.
``GET /api/v1/compare`` runs the same comparison as ``infermeter compare`` (PromQL over the
runtime's samples, in a worker thread) and answers it as JSON.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from infermeter.api.deps import ActorDep, RuntimeDep
from infermeter.api.params import parse_time_ms, positive_duration_ms
from releases.markers import KINDS, MarkerError
from releases.runs import ValidationStore
from releases.windows import Windows, compare_windows

router = APIRouter(prefix="/api/v1", tags=["events"])
DAY_MS = 86_400_000


class NewEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = Field("deploy", description=f"one of {', '.join(KINDS)}")
    model: str = Field("", max_length=255, description="the model it concerns (empty: every model)")
    version: str = Field("", max_length=255, description="the version deployed (deploys need one)")
    node: str = Field("", max_length=255, description="the node it happened on (empty: all)")
    message: str = Field("", max_length=4000)
    at: str | None = Field(None, description="when: unix seconds, RFC 3339 or now-<duration> (default: now)")


@router.post("/events", status_code=201)
async def create_event(body: NewEvent, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """Record a deploy or config change; it is drawn on the dashboard's time charts."""
    now = runtime.clock.now_ms()
    at = parse_time_ms("at", body.at, now, now)
    try:
        marker = await run_in_threadpool(
            runtime.markers.add, body.kind, model=body.model, version=body.version, node=body.node,
            message=body.message, at_ms=at, actor=who.principal.name)
    except MarkerError as exc:
        raise HTTPException(422, str(exc)) from None
    await run_in_threadpool(runtime.access.audit.record, who, "event.create", f"events/{marker.id}", None,
                            marker.to_json())
    return {"status": "success", "data": marker.to_json()}


@router.get("/events")
async def list_events(
    runtime: RuntimeDep, start: str | None = None, end: str | None = None, model: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    """Markers in [start, end] (default: the last 30 days), oldest first; ``model`` also returns
    the fleet-wide ones."""
    now = runtime.clock.now_ms()
    lo, hi = parse_time_ms("start", start, now, now - 30 * DAY_MS), parse_time_ms("end", end, now, now)
    found = await run_in_threadpool(runtime.markers.between, lo, hi, model=model, kind=kind)
    return {"status": "success", "data": [m.to_json() for m in found]}


@router.delete("/events/{event_id}", responses={404: {"description": "no such event"}})
async def delete_event(event_id: int, runtime: RuntimeDep, who: ActorDep) -> dict[str, Any]:
    """Remove a wrong marker (audited)."""
    found = await run_in_threadpool(runtime.markers.get, event_id)
    if found is None or not await run_in_threadpool(runtime.markers.delete, event_id):
        raise HTTPException(404, f"no event {event_id}")
    await run_in_threadpool(runtime.access.audit.record, who, "event.delete", f"events/{event_id}", found.to_json(),
                            None)
    return {"status": "success", "data": found.to_json()}


@router.get("/compare", responses={404: {"description": "no such event"}})
async def compare(
    runtime: RuntimeDep,
    event: int | None = Query(None, description="a marker's id"),
    at: str | None = Query(None, description="a moment instead of a marker"),
    model: str | None = Query(None, description="default: the marker's model; empty: fleet-wide"),
    window: str = Query("1h"), settle: str = Query("5m"), step: str = Query("1m"),
) -> dict[str, Any]:
    """The window before a change against the window after it: each quantity's means, change, 95 %
    interval (moving-block bootstrap), Mann-Whitney p-value and verdict."""
    if (event is None) == (at is None):
        raise HTTPException(400, "give exactly one of event and at")
    marker = None
    if event is not None:
        marker = await run_in_threadpool(runtime.markers.get, event)
        if marker is None:
            raise HTTPException(404, f"no event {event}")
        moment = marker.at_ms
    else:
        moment = parse_time_ms("at", at, runtime.clock.now_ms())
    windows = Windows(moment, positive_duration_ms("window", window),
                      positive_duration_ms("settle", settle) if settle != "0" else 0, positive_duration_ms("step", step))
    if windows.after[1] > runtime.clock.now_ms():
        raise HTTPException(400, "the window after the change is not over yet: shorten window or settle, or wait")
    chosen = model if model is not None else (marker.model if marker else "")
    result = await run_in_threadpool(
        compare_windows, runtime.source, windows, np.random.default_rng(0), model=chosen,
        node=marker.node if marker else "", marker=marker)
    return {"status": "success", "data": result.to_json()}


@router.get("/validations")
async def list_validations(runtime: RuntimeDep, limit: int = Query(50, ge=1, le=1000)) -> dict[str, Any]:
    """The acceptance check's runs (``infermeter validate``), newest first, each whole: verdict, every
    check with what it measured, the failed requests, the load phase's figures."""
    found = await run_in_threadpool(ValidationStore(runtime.engine).recent, limit)
    return {"status": "success", "data": found}
