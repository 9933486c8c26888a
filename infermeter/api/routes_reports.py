"""Finance reports over HTTP: the reports package's router, fed from the runtime's ledger,
alert history and stored spend forecast."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from forecast.ids import SeriesId
from infermeter.api.deps import PrincipalDep, RuntimeDep
from releases.runs import EvaluationStore
from reports.anomalies import AlertHistoryAnomalies
from reports.api import create_report_router
from reports.forecast import rest_of_period
from reports.model import ReportSources, SpendForecast
from reports.side_lists import AuditChanges, RecordedEvents, StoredEvaluations, VersionHistory


def report_sources(runtime: RuntimeDep, _auth: PrincipalDep) -> ReportSources:
    if runtime.alerting is None:
        raise HTTPException(503, "the cost ledger is not running")
    forecast: SpendForecast | None = None
    job = runtime.alerting.forecasting
    if job is not None:
        service = job.service
        forecast = lambda lo, hi: rest_of_period(service.latest(SeriesId("spend")), lo, hi)  # noqa: E731
    return ReportSources(
        runtime.alerting.ledger, runtime.settings.cost, runtime.clock.now_ms(), AlertHistoryAnomalies(runtime.engine),
        forecast=forecast, changes=AuditChanges(runtime.access.audit), software=VersionHistory(runtime.reader),
        events=RecordedEvents(runtime.markers),
        evaluations=StoredEvaluations(EvaluationStore(runtime.engine).between),
    )


def router() -> APIRouter:
    return create_report_router(report_sources)
