"""Finance reports (PDF, CSV, XLSX) over the cost ledger, the alert history and the forecast.

Entry points: :func:`reports.build.build_report` (sources + period -> :class:`FinanceReport`),
:func:`reports.render.render` (report -> bytes), :func:`reports.cli.register` (``infermeter
report``), :func:`reports.api.create_report_router` (``GET /api/v1/report``). Columns of the
CSV/XLSX files: ``reports/README.md``.
"""
