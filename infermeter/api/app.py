"""FastAPI app factory: the runtime is handed in, routes reach it through typed dependencies."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from alerts.notify.api import silences_router
from alerts.notify.service import Notifier
from dashboard import mount as mount_dashboard
from forecast.api import forecast_router
from ha.fence import NotLeader
from infermeter.api import (
    routes_access,
    routes_alerts,
    routes_cost,
    routes_events,
    routes_prices,
    routes_promql,
    routes_read,
    routes_reports,
    routes_series,
    routes_write,
)
from infermeter.api.deps import AccessDenied, ActorDep, authorize, editor
from infermeter.api.openapi_doc import document
from infermeter.api.params import BadParam
from infermeter.forecasting import ForecastJob
from infermeter.runtime import Runtime

log = logging.getLogger(__name__)


def _route_name(request: Request) -> str:
    """The route's path template (bounded label values), the dashboard's mount, or "unmatched"."""
    route = request.scope.get("route")
    if route is not None and hasattr(route, "path"):
        return str(route.path)
    return "/dashboard" if request.url.path.startswith("/dashboard") else "unmatched"


def _on_sighup(runtime: Runtime) -> None:
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(runtime.reload()))
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread (tests), or no SIGHUP
        pass


def create_app(runtime: Runtime, *, manage_lifecycle: bool = True) -> FastAPI:
    """``manage_lifecycle``: start the runtime on startup and stop it on shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await run_in_threadpool(runtime.start)
            await runtime.start_collectors()
            _on_sighup(runtime)
        try:
            yield
        finally:
            if manage_lifecycle:
                await runtime.stop_collectors()
                await run_in_threadpool(runtime.stop)

    app = FastAPI(
        title="infermeter",
        version="0.1.0",
        description="Observability and cost control for GPU inference fleets.",
        lifespan=lifespan,
        dependencies=[Depends(authorize)],  # every route: the role access.policy names for it
    )
    app.state.runtime = runtime

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception as exc:  # a bug answers a 500 that says where, and is counted like any answer
            log.exception("%s %s failed", request.method, request.url.path)
            response = JSONResponse({"status": "error", "errorType": "internal",
                                     "error": f"internal error in {_route_name(request)}: {type(exc).__name__} (the "
                                              "service log has the details)"}, status_code=500)
        name = _route_name(request)
        runtime.api_metrics.requests.labels(name, str(response.status_code)).inc()
        runtime.api_metrics.latency.labels(name).observe(time.perf_counter() - started)
        return response

    @app.exception_handler(AccessDenied)
    async def access_denied(_: Request, exc: AccessDenied) -> JSONResponse:
        return JSONResponse({"status": "error", "errorType": exc.error_type, "error": str(exc)},
                            status_code=exc.status, headers=exc.headers)

    @app.exception_handler(BadParam)
    async def bad_param(_: Request, exc: BadParam) -> JSONResponse:
        return JSONResponse({"status": "error", "errorType": "bad_data", "error": str(exc)}, status_code=400)

    @app.get("/health", tags=["health"])
    async def health() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.exception_handler(NotLeader)
    async def not_leader(_: Request, exc: NotLeader) -> JSONResponse:
        return JSONResponse({"status": "error", "errorType": "unavailable",
                             "error": f"{exc}; send this request to the leader of the pair"}, status_code=503)

    @app.get("/ready", tags=["health"])
    async def ready() -> JSONResponse:
        """Readiness: the store is reachable, the schema is at head, the loops run; ``ha`` says
        this process's role ("single", or "leader"/"follower" of an HA pair). A follower is ready:
        it serves the API and dashboard."""
        problems = await run_in_threadpool(runtime.readiness)
        role = runtime.role()
        if problems:
            return JSONResponse({"status": "unavailable", "problems": problems, "ha": role}, status_code=503)
        return JSONResponse({"status": "ready", "ha": role})

    @app.get("/metrics", tags=["health"])
    async def metrics() -> Response:
        """The service's own metrics in Prometheus text format."""
        body = await run_in_threadpool(generate_latest, runtime.registry)
        dcgm = runtime.dcgm_exposition()
        return Response(body + dcgm.encode(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/-/reload", tags=["health"])
    async def reload(who: ActorDep) -> JSONResponse:
        """Re-read the config file and apply its scrape targets, rules and tokens (as SIGHUP does)."""
        problems = await runtime.reload(who)
        if problems:
            return JSONResponse({"status": "error", "problems": problems}, status_code=400)
        targets = len(runtime.scrapes.statuses()) if runtime.scrapes else 0
        return JSONResponse({"status": "success", "targets": targets})

    app.include_router(routes_write.router)
    app.include_router(routes_promql.router)
    app.include_router(routes_series.router)
    app.include_router(routes_read.router)
    app.include_router(routes_alerts.router)
    app.include_router(routes_cost.router)
    app.include_router(routes_prices.router)
    app.include_router(routes_access.router)
    app.include_router(routes_events.router)
    app.include_router(silences_router(lambda: _notifier(runtime).silences, editor))
    app.include_router(forecast_router(lambda: _forecasting(runtime).service))
    app.include_router(routes_reports.router())
    if runtime.settings.dashboard.enabled:
        mount_dashboard(app, runtime)
    document(app)
    return app


def _forecasting(runtime: Runtime) -> ForecastJob:
    if runtime.alerting is None or runtime.alerting.forecasting is None:
        raise HTTPException(503, "forecasting is not running")
    return runtime.alerting.forecasting


def _notifier(runtime: Runtime) -> Notifier:
    if runtime.notifier is None:
        raise HTTPException(503, "notification is not running")
    return runtime.notifier
