"""``GET /api/v1/report?period=2026-11&format=csv|xlsx|pdf[&top=10]`` as a router factory.

The route reads through one dependency the composition root passes in, which answers the
:class:`ReportSources` of the request (and does the auth check, as the other read routes do);
nothing here reaches the runtime or a global. Answers: the file with ``Content-Disposition:
attachment``; 400 for a bad period, format or ``top``; 501 when the format's package is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from starlette.concurrency import run_in_threadpool

from reports.build import build_report
from reports.model import ReportSources
from reports.period import PeriodError, current_month, parse_period
from reports.render import FORMATS, FormatUnavailable, Rendered, render

MAX_TOP = 100


def produce(sources: ReportSources, period_text: str | None, fmt: str, top: int) -> Rendered:
    """Parse, build and render (blocking: SQL and rendering); ValueError for bad input."""
    period = parse_period(period_text) if period_text else current_month(sources.now_ms)
    return render(build_report(sources, period, top), fmt)


def create_report_router(sources: Callable[..., Any], prefix: str = "/api/v1") -> APIRouter:
    """``sources`` is a FastAPI dependency returning :class:`ReportSources` (it may itself depend
    on the request, the runtime and auth)."""
    router = APIRouter(prefix=prefix, tags=["reports"])

    @router.get("/report", response_class=Response, responses={
        200: {"content": {media: {} for media in FORMATS.values()}, "description": "the report file"},
        400: {"description": "bad period, format or top"},
        501: {"description": "the format's package is not installed"},
    })
    async def report(
        src: ReportSources = Depends(sources),  # noqa: B008 - FastAPI's dependency declaration
        period: Annotated[str | None, Query(description="2026-11, 2026-11-05 or 2026-11-01..2026-11-15 (UTC); default: this month")] = None,
        format: Annotated[str, Query(description="csv, xlsx or pdf")] = "csv",
        top: Annotated[int, Query(description="how many cost anomalies to list (0..100)")] = 10,
    ) -> Response:
        """Finance report for a period: spend by model, node, GPU type and tenant; tokens and cost
        per 1M tokens; idle cost; budget vs actual; forecast for the rest of the period; the top
        cost anomalies with their checks; prices in effect; reconciled totals."""
        if format not in FORMATS:
            raise HTTPException(400, f"format: unknown {format!r}; use {', '.join(FORMATS)}")
        if not 0 <= top <= MAX_TOP:
            raise HTTPException(400, f"top: must be between 0 and {MAX_TOP}")
        try:
            out = await run_in_threadpool(produce, src, period, format, top)
        except PeriodError as exc:
            raise HTTPException(400, f"period: {exc}") from None
        except FormatUnavailable as exc:
            raise HTTPException(501, str(exc)) from None
        return Response(out.content, media_type=out.media_type,
                        headers={"Content-Disposition": f'attachment; filename="{out.filename}"'})

    return router
