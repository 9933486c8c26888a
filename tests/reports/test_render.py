"""CSV, XLSX and PDF renderings of one report: stable columns, readable files, the totals shown."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import shutil
import subprocess
from pathlib import Path

import openpyxl
import pytest

from reports.build import build_report
from reports.model import EvaluationLine, EventLine, FinanceReport, ForecastWindow, SoftwareLine
from reports.period import parse_period
from reports.render import FormatUnavailable, csv_value, render
from reports.tables import ALL_COLUMNS, CSV_COLUMNS, sheets
from tests.reports.conftest import NOW, Seeded

JAN = parse_period("2027-01")
CSV_HEADER = "period,section,dimension,key,metric,value,unit,detail"
SHEETS = [
    "summary", "checks", "spend_component", "spend_model", "spend_node", "spend_gpu_model", "spend_tenant",
    "spend_purchase_class", "tokens_fleet", "tokens_model", "tokens_node", "tokens_tenant", "budgets", "forecast",
    "anomalies", "prices", "daily", "changes", "software", "events", "evaluations", "data", "columns",
]
# The columns of every sheet, pinned: changing one breaks spreadsheets built on them.
HEADERS = {
    "summary": "item value unit detail",
    "checks": "check expected_dollars actual_dollars difference_dollars tolerance_dollars ok",
    "spend": "key label spend_dollars share_ratio gpu_hours energy_kwh",
    "tokens": "key label prompt_tokens generated_tokens requests spend_dollars dollars_per_million_generated "
              "dollars_per_million_total note",
    "budgets": "scope model budget_period spend_budget_dollars prorated spent_dollars spend_ratio projected_dollars "
               "projected_ratio unit_budget_dollars_per_million unit_actual_dollars_per_million unit_ratio status",
    "forecast": "item value unit detail",
    "anomalies": "fired_at alertname resolved_at severity scope model value_dollars_per_million summary "
                 "check_utilization check_request_mix check_autoscaling checks_note",
    "prices": "kind item effective_from rate_dollars rate_unit pue effective_to in_period",
    "daily": "day spend_dollars cumulative_dollars",
    "changes": "at action object actor role address",
    "software": "node component value first_seen last_seen odd replaced cluster",
    "events": "at kind model version node message actor",
    "evaluations": "at run candidate gpu gpus purchase_class dollars_per_hour tokens_per_s_per_gpu ttft_p99_s "
                   "itl_p99_ms dollars_per_million sla",
}
EVALUATIONS = [EvaluationLine(NOW - 7_200_000, 1, "batched-h100", "H100", 1, "on_demand", 4.0, 410.5, 0.21, 18.0, 2.71,
                              "met (cheapest)"),
               EvaluationLine(NOW - 7_200_000, 1, "single-a100", "A100", 1, "on_demand", 2.0, 96.1, 0.08, 9.5, 5.78,
                              "met")]
EVENTS = [EventLine(NOW - 5_400_000, "deploy", "llama", "v2", "", "new weights", "operator-1"),
          EventLine(NOW - 3_600_000, "config", "", "", "n2", "max_batch_size 64", "cli:ops")]
SOFTWARE = [  # what reports.side_lists.VersionHistory reads from the store (tested in tests/drift)
    SoftwareLine("n1", "", "driver", "550.54.15", NOW - 7_200_000, NOW, False, ""),
    SoftwareLine("n2", "", "driver", "535.104.05", NOW - 7_200_000, NOW, True, ""),
    SoftwareLine("n1", "", "nccl", "2.21.5", NOW - 7_200_000, NOW - 3_600_000, False, ""),
    SoftwareLine("n1", "", "nccl", "2.23.4", NOW - 3_540_000, NOW, False, "2.21.5"),
]


@pytest.fixture(scope="module")
def report(seeded: Seeded) -> FinanceReport:
    window = ForecastWindow(NOW, JAN.end_ms, mean=300.0, low=250.0, high=380.0, source="ets")
    sources = dataclasses.replace(seeded.sources(forecast=lambda lo, hi: window), software=lambda lo, hi: SOFTWARE,
                                  events=lambda lo, hi: EVENTS, evaluations=lambda lo, hi: EVALUATIONS)
    return build_report(sources, JAN)


def test_csv_header_and_rows_are_stable(report: FinanceReport) -> None:
    out = render(report, "csv")
    assert out.media_type.startswith("text/csv") and out.filename == "infermeter-cost-2027-01.csv"
    text = out.content.decode("utf-8")
    assert text.splitlines()[0] == CSV_HEADER
    assert tuple(CSV_HEADER.split(",")) == CSV_COLUMNS
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["section"] for r in rows} == {"summary", "checks", "spend", "tokens", "budgets", "forecast", "anomalies",
                                           "prices", "daily", "software", "events", "evaluations"}
    summary = {r["metric"]: r for r in rows if r["section"] == "summary"}
    assert float(summary["total_dollars"]["value"]) == pytest.approx(report.totals.total, abs=1e-6)
    assert summary["total_dollars"]["unit"] == "USD" and summary["reconciled"]["value"] == "1"
    # the CSV reconciles on its own: components add up to the total
    parts = sum(float(summary[f"{c}_dollars"]["value"]) for c in ("gpu", "energy", "idle", "overhead"))
    assert parts == pytest.approx(float(summary["total_dollars"]["value"]), abs=1e-5)
    by_model = [r for r in rows if r["section"] == "spend" and r["dimension"] == "model" and r["metric"] == "spend_dollars"]
    assert {r["key"] for r in by_model} == {"llama", "qwen"}
    assert sum(float(r["value"]) for r in by_model) == pytest.approx(report.totals.total, abs=1e-5)
    unit_costs = [r for r in rows if r["metric"] == "dollars_per_million_generated" and r["value"]]
    assert unit_costs and {r["unit"] for r in unit_costs} == {"USD/1M tokens"}
    checks = [r for r in rows if r["section"] == "anomalies" and r["metric"] == "check_request_mix"]
    assert len(checks) == 2 and all("tokens/request" in r["detail"] for r in checks)
    assert all(re.fullmatch(r"-?\d+(\.\d{1,6})?", r["value"]) for r in rows if r["value"])  # no exponents


def test_csv_values() -> None:
    assert [csv_value(v) for v in (None, True, 1.5, 2.0, 1e-9, float("nan"), 1234567.125, "x", -0.0000001)] == [
        "", "1", "1.5", "2", "0", "", "1234567.125", "x", "0"]


def test_sheet_columns_are_pinned_and_documented(report: FinanceReport) -> None:
    for sheet in sheets(report):
        assert " ".join(c.name for c in sheet.columns) == HEADERS[sheet.section], sheet.name
        assert all(len(row) == len(sheet.columns) for row in sheet.rows), sheet.name
    readme = (Path(__file__).parents[2] / "reports" / "README.md").read_text()
    for section, columns in ALL_COLUMNS.items():
        for column in columns:
            assert f"`{column.name}`" in readme, f"reports/README.md does not document {section}.{column.name}"
    assert CSV_HEADER in readme


def test_xlsx_is_readable(report: FinanceReport, tmp_path: Path) -> None:
    out = render(report, "xlsx")
    assert out.filename.endswith(".xlsx") and out.content[:2] == b"PK"
    path = tmp_path / out.filename
    path.write_bytes(out.content)
    book = openpyxl.load_workbook(path, read_only=True)
    assert book.sheetnames == SHEETS
    for name in SHEETS[:-2]:
        header = next(book[name].iter_rows(max_row=1, values_only=True))
        section = "spend" if name.startswith("spend_") else "tokens" if name.startswith("tokens_") else name
        assert " ".join(str(h) for h in header) == HEADERS[section]
    summary = {row[0]: row for row in book["summary"].iter_rows(min_row=2, values_only=True)}
    assert summary["total_dollars"][1] == pytest.approx(report.totals.total)
    data = list(book["data"].iter_rows(values_only=True))
    assert ",".join(str(h) for h in data[0]) == CSV_HEADER and len(data) > 100
    documented = {(r[0], r[1]) for r in book["columns"].iter_rows(min_row=2, values_only=True)}
    assert ("budgets", "spend_ratio") in documented and ("anomalies", "check_autoscaling") in documented


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is installed by make test")
def test_pdf_text_shows_the_totals_and_their_reconciliation(report: FinanceReport, tmp_path: Path) -> None:
    out = render(report, "pdf")
    assert out.content.startswith(b"%PDF-") and out.media_type == "application/pdf"
    path = tmp_path / out.filename
    path.write_bytes(out.content)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True, text=True).stdout
    t = report.totals
    total = f"{t.total:,.2f}"
    assert re.search(rf"Total\s+{re.escape(total)}\s+100\.0%", text)
    line = " ".join(text.split())
    assert (f"Attributed {t.attributed:,.2f} + idle {t.idle:,.2f} + overhead {t.overhead:,.2f} = {total} USD; "
            f"ledger total {total} USD: reconciles") in line
    for expected in ("Budget vs actual", "over budget", "Forecast, rest of period", "Spend by GPU type",
                     "NVIDIA H100 80GB HBM3", "acme", "globex", "(unattributed)" if any(not s.key for s in report.spend["model"]) else "llama",
                     "TokenCostOverBudget", "request mix: prompt tokens/request 200 vs 150", "checks no longer on record",
                     "Prices in effect", "H100 / on_demand", "2027-01-15 08:30 UTC", "sum of spend by tenant = total",
                     "Versions and NCCL settings per node", "535.104.05 differs from most nodes", "replaced 2.21.5",
                     "Deploys and config changes", "deploy llama v2: new weights", "config all models on n2",
                     "Hardware evaluations", "per 1M output tokens, measured (evaluation 1)", "batched-h100",
                     f"{report.tokens['fleet'][0].dollars_per_million_generated:,.2f}"):
        assert expected in line, expected
    assert "FAILED" not in line and "DOES NOT RECONCILE" not in line


def test_pdf_without_forecast_or_budgets(seeded: Seeded, tmp_path: Path) -> None:
    settings = seeded.settings.model_copy(update={"budgets": []})
    src = seeded.sources()
    r = build_report(type(src)(src.ledger, settings, src.now_ms, None, None), JAN)
    path = tmp_path / "r.pdf"
    path.write_bytes(render(r, "pdf").content)
    if shutil.which("pdftotext"):
        text = " ".join(subprocess.run(["pdftotext", str(path), "-"], check=True, capture_output=True, text=True).stdout.split())
        assert "no forecast available" in text and "No budgets are configured" in text
        assert "no alert history was available" in text


def test_unknown_and_unavailable_formats(report: FinanceReport, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError):
        render(report, "docx")
    import builtins

    real_import = builtins.__import__

    def no_reportlab(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("reportlab"):
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.delitem(__import__("sys").modules, "reports.pdf", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_reportlab)
    with pytest.raises(FormatUnavailable) as info:
        render(report, "pdf")
    assert info.value.package == "reportlab"
    assert render(report, "csv").content.startswith(CSV_HEADER.encode())
