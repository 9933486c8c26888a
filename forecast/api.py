"""``GET /api/v1/forecast``: the latest forecast of one or more series, as JSON.

Parameters: ``series`` (repeatable and/or comma-separated, e.g. ``spend:fleet``,
``cost_per_mtok:model=llama-3-70b``; default: every configured series), ``horizon`` (``72h``,
``3d``; default 72h, at most the service's maximum), ``refresh`` (``true`` recomputes now).
A stored forecast is served while fresh and long enough, else one is computed on demand.

Errors: 400 ``{"status": "error", "errorType": "bad_data", "param": ..., "error": ...}``
naming the bad parameter; 503 with ``"errorType": "unavailable"`` when a series' history
cannot be read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from forecast.ids import parse_horizon, parse_series_list
from forecast.service import ForecastService, ForecastUnavailable


def _bad(param: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"status": "error", "errorType": "bad_data", "param": param, "error": f"{param}: {message}"},
        status_code=400,
    )


def forecast_router(get_service: Callable[[], ForecastService]) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["forecast"])

    @router.get("/forecast", response_model=None)
    async def get_forecast(
        series: Annotated[
            list[str] | None, Query(description="quantity:scope, e.g. spend:fleet; repeat or comma-separate")
        ] = None,
        horizon: Annotated[str, Query(description="hours or days ahead, e.g. 72h or 3d")] = "72h",
        refresh: Annotated[
            str, Query(description="true: recompute now instead of serving the stored one")
        ] = "false",
    ) -> dict[str, Any] | JSONResponse:
        service = get_service()
        try:
            hours = parse_horizon(horizon, service.config.max_horizon_h)
        except ValueError as exc:
            return _bad("horizon", str(exc))
        try:
            wanted = parse_series_list(series or []) or list(service.series)
        except ValueError as exc:
            return _bad("series", str(exc))
        if not wanted:
            return _bad("series", "is required (no series are configured)")
        if refresh.lower() not in ("true", "false", "1", "0"):
            return _bad("refresh", f"{refresh!r} is not true or false")
        force = refresh.lower() in ("true", "1")

        def compute() -> list[dict[str, Any]]:
            return [service.get_or_compute(sid, hours, refresh=force).to_json() for sid in wanted]

        try:
            forecasts = await run_in_threadpool(compute)
        except ForecastUnavailable as exc:
            return JSONResponse(
                {"status": "error", "errorType": "unavailable", "series": str(exc.series), "error": str(exc)},
                status_code=503,
            )
        return {"status": "success", "forecasts": forecasts}

    return router
