"""GET /api/v1/forecast through FastAPI's TestClient (a real ASGI round trip)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from forecast.api import forecast_router
from forecast.ids import HOUR_MS, SeriesId
from forecast.service import ForecastService, ServiceConfig
from store.clock import ManualClock
from tests.forecast.synthetic import SyntheticHistory

T0 = 1_800_000_000_000


@pytest.fixture
def client(sqlite_url: str) -> Iterator[TestClient]:
    history = SyntheticHistory(T0 - 20 * 24 * HOUR_MS, fail={"spend:model=down"})
    series = [SeriesId.parse("spend:fleet"), SeriesId.parse("tokens:fleet")]
    service = ForecastService(
        history, create_engine(sqlite_url), ManualClock(T0), series, ServiceConfig(history_h=24 * 10)
    )
    app = FastAPI()
    app.include_router(forecast_router(lambda: service))
    with TestClient(app) as c:
        yield c


def test_forecast_json(client: TestClient) -> None:
    r = client.get("/api/v1/forecast", params={"series": "cost_per_mtok:fleet", "horizon": "2d"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "success"
    [f] = body["forecasts"]
    assert f["series"] == "cost_per_mtok:fleet" and f["unit"] == "$ per 1M tokens"
    assert f["horizon_hours"] == 48 and len(f["points"]) == 48
    assert set(f["points"][0]) == {"time", "ts_ms", "mean", "lo80", "hi80", "lo95", "hi95"}
    assert f["points"][0]["time"] == "2027-01-15T08:00:00Z"
    assert f["model"].startswith("ratio(") and f["generated_at"] == "2027-01-15T08:00:00Z"
    assert set(f["backtest"]) == {"wape", "mase", "coverage80", "coverage95"}
    assert 0 <= f["backtest"]["coverage80"] <= f["backtest"]["coverage95"] <= 1
    assert isinstance(f["flags"], list) and "check" in f["details"]


def test_default_and_repeated_series(client: TestClient) -> None:
    r = client.get("/api/v1/forecast")
    assert [f["series"] for f in r.json()["forecasts"]] == ["spend:fleet", "tokens:fleet"]
    assert len(r.json()["forecasts"][0]["points"]) == 72
    r = client.get("/api/v1/forecast?series=tokens:fleet&series=spend:fleet,tokens:fleet&horizon=6")
    assert [f["series"] for f in r.json()["forecasts"]] == ["tokens:fleet", "spend:fleet"]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("series=watts:fleet", "series"),
        ("series=spend:bad%20scope", "series"),
        ("horizon=0h", "horizon"),
        ("horizon=999h", "horizon"),
        ("horizon=soon", "horizon"),
        ("refresh=maybe", "refresh"),
    ],
)
def test_bad_parameters_are_named(client: TestClient, query: str, param: str) -> None:
    r = client.get(f"/api/v1/forecast?{query}")
    assert r.status_code == 400
    assert r.json()["param"] == param and r.json()["error"].startswith(param)


def test_unreadable_history_is_503(client: TestClient) -> None:
    r = client.get("/api/v1/forecast?series=spend:model=down")
    assert r.status_code == 503 and r.json()["series"] == "spend:model=down"
