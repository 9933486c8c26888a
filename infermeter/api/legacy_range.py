"""infermeter's older ``query_range`` extension, kept for the callers that use it: a bare
selector folded per step in the store (``fn`` = last, avg, min, max, sum, count, rate,
increase), optionally aggregated ``by`` labels with ``agg``, or a histogram ``quantile`` over
``*_bucket`` series. Rollups answer it where the step allows, so long ranges cost no raw reads.
Points are stamped at the start of their step. PromQL queries do not come here."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool

from infermeter.api.params import BadParam, parse_step_ms, parse_time_ms
from infermeter.api.prom_params import ApiError, Params
from promql.aggregate import format_value
from store.reader import RangeQuery
from store.selector_text import SelectorError, parse_selector


async def legacy_range(runtime: Any, params: Params) -> dict[str, Any]:
    now = runtime.clock.now_ms()
    text = params.get("query")
    try:
        if not text:
            raise BadParam("query", 'is required (a selector such as gpu_util{gpu="0"})')
        try:
            selector = parse_selector(text)
        except SelectorError as exc:
            raise BadParam("query", str(exc)) from exc
        end_ms = parse_time_ms("end", params.get("end"), now, now)
        start_ms = parse_time_ms("start", params.get("start"), now, end_ms - 3_600_000)
        if start_ms > end_ms:
            raise BadParam("start", "is after end")
        step_ms = parse_step_ms("step", params.get("step"), max(1000, (end_ms - start_ms) // 1000))
        if (end_ms - start_ms) // step_ms > 11_000:
            raise BadParam("step", "too small for the range: at most 11,000 points per series")
        by = params.get("by")
        by_labels = tuple(label.strip() for label in by.split(",") if label.strip()) if by else None
        quantile = params.get("quantile")
        if quantile is not None:
            q = float(quantile)
            results = await run_in_threadpool(
                runtime.reader.histogram_quantile, q, selector, start_ms, end_ms, step_ms, by_labels or ()
            )
        else:
            fn, agg = params.get("fn") or "avg", params.get("agg") or "sum"
            q_range = RangeQuery(selector, start_ms, end_ms, step_ms, fn, by_labels, agg)  # type: ignore[arg-type]
            results = await run_in_threadpool(runtime.reader.range, q_range)
    except (BadParam, ValueError) as exc:
        message = str(exc) if isinstance(exc, BadParam) else f"query: {exc}"
        raise ApiError("bad_data", message) from None
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": r.labels, "values": [[t / 1000, format_value(float(v))] for t, v in r.points()]}
                for r in results
            ],
        },
    }
