"""Render a :class:`FinanceReport` as CSV, XLSX or PDF bytes.

CSV is the long form of :mod:`reports.tables` (header :data:`reports.tables.CSV_COLUMNS`, one
figure per row) and needs nothing beyond the standard library. XLSX needs ``openpyxl`` and PDF
``reportlab``; both are imported only when asked for, and a missing one is reported as
:class:`FormatUnavailable` (the API answers 501 with it, the CLI exits 1) rather than breaking
the other formats.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass

from reports.model import FinanceReport
from reports.tables import CSV_COLUMNS, Cell, long_rows

FORMATS: dict[str, str] = {
    "csv": "text/csv; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pdf": "application/pdf",
}
PACKAGES = {"xlsx": "openpyxl", "pdf": "reportlab"}


class FormatUnavailable(Exception):
    """The format's package is not installed; ``package`` says which to install."""

    def __init__(self, fmt: str, package: str) -> None:
        super().__init__(f"{fmt} reports need the '{package}' package (pip install {package})")
        self.format = fmt
        self.package = package


@dataclass(frozen=True)
class Rendered:
    content: bytes
    media_type: str
    filename: str


def csv_value(value: Cell) -> str:
    """Numbers with up to 6 decimals and no exponent; empty for None and non-finite values."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        text = f"{value:.6f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


def render_csv(report: FinanceReport) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in long_rows(report):
        writer.writerow([csv_value(v) for v in row])
    return buf.getvalue().encode("utf-8")


def filename(report: FinanceReport, fmt: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in report.period.label)
    return f"infermeter-cost-{safe}.{fmt}"


def _renderer(fmt: str) -> Callable[[FinanceReport], bytes]:
    if fmt == "xlsx":
        from reports.xlsx import render_xlsx

        return render_xlsx
    from reports.pdf import render_pdf

    return render_pdf


def render(report: FinanceReport, fmt: str) -> Rendered:
    """Raises ValueError for an unknown format and :class:`FormatUnavailable` for a missing package."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")
    if fmt == "csv":
        content = render_csv(report)
    else:
        try:
            renderer = _renderer(fmt)
        except ImportError as exc:
            if exc.name and exc.name.split(".")[0] == PACKAGES[fmt]:
                raise FormatUnavailable(fmt, PACKAGES[fmt]) from exc
            raise
        content = renderer(report)
    return Rendered(content, FORMATS[fmt], filename(report, fmt))
