"""The report as an XLSX workbook (openpyxl): one sheet per table of :func:`reports.tables.sheets`
with the column names in row 1 (stable, for formulas and imports), then ``data`` (the CSV's long
form) and ``columns`` (every column with its unit and meaning). Amounts keep full precision and
are only formatted to cents."""

from __future__ import annotations

import io
import math

from openpyxl import Workbook
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter

from reports.model import FinanceReport
from reports.tables import CSV_COLUMNS, SUMMARY, Cell, Column, long_rows, sheets, unit_of

MONEY = "#,##0.00"
RATIO = "0.0%"
COUNT = "#,##0"


def _format(column: Column) -> str | None:
    if column.kind != "number":
        return None
    if column.unit == "ratio" and column.name != "pue":
        return RATIO
    if column.unit in ("tokens", "requests"):
        return COUNT
    if "{currency}" in column.unit:
        return MONEY
    return "#,##0.000"


def _cell(value: Cell) -> Cell:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def render_xlsx(report: FinanceReport) -> bytes:
    book = Workbook()
    first = book.active
    assert first is not None
    book.remove(first)
    bold = Font(bold=True)
    catalogue: list[tuple[str, str, str, str]] = []
    for sheet in sheets(report):
        ws = book.create_sheet(sheet.name)
        ws.append([c.name for c in sheet.columns])
        for cell in ws[1]:
            cell.font = bold
        formats = [_format(c) for c in sheet.columns]
        for row in sheet.rows:
            ws.append([_cell(v) for v in row])
        for idx, (column, fmt) in enumerate(zip(sheet.columns, formats), start=1):
            letter = get_column_letter(idx)
            width = max([len(column.name)] + [len(str(r[idx - 1])) for r in sheet.rows if r[idx - 1] is not None])
            ws.column_dimensions[letter].width = min(60, max(10, width + 2))
            if fmt and sheet.columns is not SUMMARY:
                for (cell,) in ws.iter_rows(min_row=2, min_col=idx, max_col=idx):
                    cell.number_format = fmt
            catalogue.append((sheet.name, column.name, unit_of(column, report.currency), column.doc))
        if sheet.columns is SUMMARY:  # item/value sheets: format each value by its own unit
            for row_cells in ws.iter_rows(min_row=2, max_col=3):
                unit = str(row_cells[2].value or "")
                row_cells[1].number_format = MONEY if unit.startswith(report.currency) else "General"
        ws.freeze_panes = "A2"
    data = book.create_sheet("data")
    data.append(list(CSV_COLUMNS))
    for row in long_rows(report):
        data.append([_cell(v) for v in row])
    data.freeze_panes = "A2"
    cols = book.create_sheet("columns")
    cols.append(["sheet", "column", "unit", "meaning"])
    for entry in catalogue:
        cols.append(list(entry))
    for name in CSV_COLUMNS:
        cols.append(["data", name, "", "the CSV's columns: see reports/README.md"])
    book.properties.creator = "infermeter"
    book.properties.title = f"infermeter cost report {report.period.label}"
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
