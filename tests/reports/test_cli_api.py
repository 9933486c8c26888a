"""``infermeter report`` over a config file and the store it names, and ``GET /api/v1/report``
served over real loopback HTTP; the same report on PostgreSQL."""

from __future__ import annotations

import argparse
import csv
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openpyxl
import pytest
import uvicorn
import yaml
from fastapi import FastAPI, Header, HTTPException

from reports.api import create_report_router
from reports.build import build_report
from reports.cli import register
from reports.model import ForecastWindow, ReportSources
from reports.period import parse_period
from store import ManualClock
from tests.reports.conftest import NOW, Seeded, cost_settings, seed
from tests.service import free_port

CSV_HEADER = "period,section,dimension,key,metric,value,unit,detail"


def _main(argv: list[str], clock: ManualClock) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="infermeter")
    parser.add_argument("--config")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub, forecast=lambda engine, settings, now: (lambda lo, hi: ForecastWindow(lo, hi, 123.0, 100.0, 150.0)),
             clock=clock)
    args = parser.parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def config(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cfg") / "infermeter.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": seeded.url},
                                    "cost": cost_settings().model_dump(mode="json", exclude_defaults=True)}))
    return str(path)


def test_cli_writes_each_format(config: str, seeded: Seeded, tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    code, out, err = _main(["--config", config, "report", "--period", "2027-01", "--format", "csv"], clock)
    assert code == 0, err
    assert out.splitlines()[0] == CSV_HEADER
    rows = list(csv.DictReader(io.StringIO(out)))
    total = {r["metric"]: r["value"] for r in rows if r["section"] == "summary"}["total_dollars"]
    expected = build_report(seeded.sources(), parse_period("2027-01")).totals.total
    assert float(total) == pytest.approx(expected, abs=1e-5)
    mean = {r["metric"]: r["value"] for r in rows if r["section"] == "forecast"}["forecast_mean_dollars"]
    assert float(mean) == 123.0  # the forecast factory was used

    target = tmp_path / "jan.xlsx"
    code, out, err = _main(["--config", config, "report", "--period", "2027-01", "--format", "xlsx", "--out", str(target)], clock)
    assert code == 0, err
    assert f"wrote {target}" in out
    assert openpyxl.load_workbook(target, read_only=True)["summary"]["A8"].value == "total_dollars"

    target = tmp_path / "jan.pdf"
    code, out, err = _main(["--config", config, "report", "--period", "2027-01", "--out", str(target)], clock)
    assert code == 0, err
    assert target.read_bytes().startswith(b"%PDF-")


def test_cli_errors(config: str, tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    code, _, err = _main(["--config", config, "report", "--period", "november"], clock)
    assert code == 2 and "--period" in err and "2026-11" in err
    code, _, err = _main(["--config", config, "report", "--format", "pdf", "--out", "-"], clock)
    assert code == 1 and "use --out FILE" in err  # a text-only stream takes no PDF
    code, _, err = _main(["--config", config, "report", "--top", "-1"], clock)
    assert code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("store:\n  url: 5\ncost:\n  gpu_prices: nope\n")
    code, _, err = _main(["--config", str(bad), "report"], clock)
    assert code == 1 and "bad.yaml" in err
    unmigrated = tmp_path / "empty.yaml"
    unmigrated.write_text(yaml.safe_dump({"store": {"url": f"sqlite:///{tmp_path / 'empty.db'}"}}))
    code, _, err = _main(["--config", str(unmigrated), "report"], clock)
    assert code == 1 and "db upgrade" in err


@pytest.fixture(scope="module")
def api(seeded: Seeded) -> Iterator[str]:
    """The router on a bare app, its dependency checking a token the way the service's does."""

    def sources(authorization: str | None = Header(default=None)) -> ReportSources:
        if authorization != "Bearer s3cret":
            raise HTTPException(401, "a valid bearer token is required")
        return seeded.sources()

    app = FastAPI()
    app.include_router(create_report_router(sources))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(5)


def test_api_serves_each_format(api: str, seeded: Seeded) -> None:
    auth = {"Authorization": "Bearer s3cret"}
    with httpx.Client(base_url=api, headers=auth, timeout=30) as client:
        r = client.get("/api/v1/report", params={"period": "2027-01", "format": "csv"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/csv")
        assert r.headers["content-disposition"] == 'attachment; filename="infermeter-cost-2027-01.csv"'
        assert r.text.splitlines()[0] == CSV_HEADER
        default = client.get("/api/v1/report")  # this month (of the sources' clock) as CSV
        assert default.status_code == 200 and default.text.splitlines()[1].startswith("2027-01,summary,")
        assert client.get("/api/v1/report", params={"period": "2027-01", "format": "pdf"}).content.startswith(b"%PDF-")
        x = client.get("/api/v1/report", params={"period": "2027-01", "format": "xlsx"})
        assert x.status_code == 200 and x.content[:2] == b"PK"
        assert client.get("/api/v1/report", params={"period": "2027-13"}).status_code == 400
        assert client.get("/api/v1/report", params={"format": "docx"}).status_code == 400
        assert client.get("/api/v1/report", params={"top": 1000}).status_code == 400
    assert httpx.get(f"{api}/api/v1/report", timeout=10).status_code == 401


@pytest.mark.postgres
def test_report_on_postgresql(pg_url: str) -> None:
    """The same seeded store on PostgreSQL gives the same, reconciled report."""
    for pg in seed(pg_url):
        r = build_report(pg.sources(), parse_period("2027-01"))
        assert r.reconciled and len(r.anomalies) == 3
        assert r.totals.components_sum == pytest.approx(r.totals.total, abs=1e-9)
        assert r.totals.overhead == pytest.approx(4.0)
