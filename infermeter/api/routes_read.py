"""Federation and scrape targets in the shape of Prometheus's HTTP API (the query API is in
:mod:`infermeter.api.routes_promql`)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from starlette.concurrency import run_in_threadpool

from infermeter.api.deps import RuntimeDep
from infermeter.api.params import BadParam
from store.selector_text import SelectorError, parse_selector
from store.series_index import Selector
from store.types import SeriesKey

router = APIRouter(prefix="/api/v1", tags=["query"])


def _selector(name: str, text: str | None) -> Selector:
    if not text:
        raise BadParam(name, "is required (a selector such as gpu_util{gpu=\"0\"})")
    try:
        return parse_selector(text)
    except SelectorError as exc:
        raise BadParam(name, str(exc)) from exc


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value)) if abs(value) < 1e15 else repr(value)


@router.get("/federate", include_in_schema=True, tags=["query"])
async def federate(runtime: RuntimeDep, match: Annotated[list[str] | None, Query(alias="match[]")] = None) -> Response:
    """Prometheus federation: the newest sample (within 5 min) of every series matching any
    ``match[]``, with its timestamp, for a Prometheus scraping with ``honor_labels: true``."""
    if not match:
        raise BadParam("match[]", "at least one selector is required")
    selectors = [_selector("match[]", m) for m in match]
    now = runtime.clock.now_ms()
    lines: list[str] = []
    seen: set[SeriesKey] = set()
    for sel in selectors:
        for key, ts, v in await run_in_threadpool(runtime.reader.instant, sel, now):
            if key in seen:
                continue
            seen.add(key)
            lines.append(f"{key.canonical()} {_fmt(v)} {ts}")
    return Response("\n".join(sorted(lines)) + "\n", media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/targets")
async def targets(runtime: RuntimeDep) -> dict[str, Any]:
    """Scrape targets and their health, in the shape of Prometheus's /api/v1/targets."""
    statuses = runtime.scrapes.statuses() if runtime.scrapes else []
    active = []
    for st in statuses:
        spec = st.spec
        active.append(
            {
                "labels": dict(spec.target_labels()),
                "scrapeUrl": spec.url,
                "health": "up" if st.health.up else ("unknown" if st.scrapes == 0 else "down"),
                "lastError": st.health.error,
                "lastErrorReason": st.health.reason,
                "lastScrape": st.last_scrape_ms / 1000,
                "lastScrapeDuration": st.last_duration_s,
                "scrapeInterval": f"{spec.interval_s:g}s",
                "scrapeTimeout": f"{spec.timeout_s:g}s",
                "scrapes": st.scrapes,
                "failures": st.failures,
            }
        )
    return {"status": "success", "data": {"activeTargets": active}}
