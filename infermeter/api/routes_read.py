"""Read endpoints in the shape of Prometheus's HTTP API (so Grafana-minded tools read them)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from starlette.concurrency import run_in_threadpool

from promql import EvalContext, ExprError, Vector
from promql import parse as parse_expr
from promql.sources import StoreSource
from infermeter.api.deps import RuntimeDep
from infermeter.api.params import BadParam, parse_step_ms, parse_time_ms
from store.reader import COMBINES, FNS, RangeQuery
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


@router.get("/query_range")
async def query_range(
    runtime: RuntimeDep,
    query: str | None = None,
    start: str | None = None,
    end: str | None = None,
    step: str | None = None,
    fn: Annotated[str, Query(description=f"per-step function: {', '.join(FNS)}")] = "avg",
    by: Annotated[str | None, Query(description="comma-separated labels to aggregate by")] = None,
    agg: Annotated[str, Query(description=f"cross-series aggregation with `by`: {', '.join(COMBINES)}")] = "sum",
    quantile: Annotated[float | None, Query(description="histogram_quantile over a *_bucket selector")] = None,
) -> dict[str, Any]:
    """Stepped range query. ``query`` is a series selector; ``fn`` folds the samples of each step
    (rate and increase handle counter resets); ``by`` aggregates series; ``quantile`` computes
    a histogram quantile from ``*_bucket`` series."""
    now = runtime.clock.now_ms()
    selector = _selector("query", query)
    end_ms = parse_time_ms("end", end, now, now)
    start_ms = parse_time_ms("start", start, now, end_ms - 3_600_000)
    if start_ms > end_ms:
        raise BadParam("start", "is after end")
    step_ms = parse_step_ms("step", step, max(1000, (end_ms - start_ms) // 1000))
    if (end_ms - start_ms) // step_ms > 11_000:
        raise BadParam("step", "too small for the range: at most 11,000 points per series")
    by_labels = tuple(label.strip() for label in by.split(",") if label.strip()) if by else None
    try:
        if quantile is not None:
            results = await run_in_threadpool(
                runtime.reader.histogram_quantile, quantile, selector, start_ms, end_ms, step_ms, by_labels or ()
            )
        else:
            q = RangeQuery(selector, start_ms, end_ms, step_ms, fn, by_labels, agg)  # type: ignore[arg-type]
            results = await run_in_threadpool(runtime.reader.range, q)
    except ValueError as exc:
        raise BadParam("query", str(exc)) from exc
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": r.labels,
                    "values": [[t / 1000, _fmt(v)] for t, v in r.points()],
                }
                for r in results
            ],
        },
    }


@router.get("/query")
async def query_instant(runtime: RuntimeDep, query: str | None = None, time: str | None = None) -> dict[str, Any]:
    """Instant query in the rule language (a PromQL subset: selectors, rate/increase/..., aggregations
    by label, arithmetic and comparisons, histogram_quantile, group_ratio) at ``time``."""
    now = runtime.clock.now_ms()
    if not query:
        raise BadParam("query", "is required (e.g. sum by (model) (rate(inference_generation_tokens_total[5m])))")
    at = parse_time_ms("time", time, now, now)
    try:
        node = parse_expr(query)
        value = await run_in_threadpool(EvalContext(StoreSource(runtime.reader), at).evaluate, node)
    except ExprError as exc:
        raise BadParam("query", f"{exc.message} (at character {exc.pos + 1})") from exc
    if isinstance(value, Vector):
        result = [{"metric": dict(labels), "value": [at / 1000, _fmt(v)]} for labels, v in zip(value.labels, value.values.tolist())]
        return {"status": "success", "data": {"resultType": "vector", "result": result}}
    if isinstance(value, str):
        return {"status": "success", "data": {"resultType": "string", "result": [at / 1000, value]}}
    return {"status": "success", "data": {"resultType": "scalar", "result": [at / 1000, _fmt(float(value))]}}


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


@router.get("/series")
async def series(
    runtime: RuntimeDep,
    match: Annotated[list[str] | None, Query(alias="match[]")] = None,
) -> dict[str, Any]:
    """Label sets of the series matching any of the ``match[]`` selectors."""
    if not match:
        raise BadParam("match[]", "at least one selector is required")
    selectors = [_selector("match[]", m) for m in match]
    seen: dict[int, dict[str, str]] = {}
    for sel in selectors:
        for sid, key in runtime.reader.select(sel):
            seen[sid] = {"__name__": key.name, **key.labels_dict()}
    return {"status": "success", "data": [seen[sid] for sid in sorted(seen)]}


@router.get("/label/__name__/values")
async def metric_names(runtime: RuntimeDep) -> dict[str, Any]:
    """Every metric name in the store."""
    with runtime.store.lock:
        names = runtime.store.index.metrics()
    return {"status": "success", "data": names}


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
