"""``infermeter report [--period 2026-11] [--format pdf|csv|xlsx] [--out FILE] [--top N]``.

Opens the store read-only (as ``cost recompute`` does), reads the cost ledger and the alert
history, and writes the file. Without ``--out``: CSV goes to standard output, PDF and XLSX to
``./infermeter-cost-<period>.<format>``; ``--out -`` always means standard output.

``register(sub, forecast=None)`` adds the subcommand; ``forecast`` (optional) is a factory
``(engine, settings, now_ms) -> SpendForecast | None`` the composition root supplies once stored
forecasts exist; without one the report says "no forecast available".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from access.audit import AuditLog
from releases.markers import MarkerStore
from releases.runs import EvaluationStore
from reports.model import SpendForecast
from reports.side_lists import AuditChanges, RecordedEvents, StoredEvaluations, VersionHistory
from store.clock import Clock

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
ForecastFactory = Callable[[Any, Any, int], SpendForecast | None]


def _write(content: bytes, target: str, out: TextIO, binary: bool) -> None:
    """To a file, or to standard output (bytes through its buffer; a text-only stream takes CSV only)."""
    if target != "-":
        Path(target).write_bytes(content)
        return
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()
        buffer.write(content)
        buffer.flush()
    elif binary:
        raise OSError("standard output takes no binary data here; use --out FILE")
    else:
        out.write(content.decode("utf-8"))


def cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from infermeter.cli_store import SchemaBehind, ledger_for, open_read_only
    from infermeter.config_file import ConfigError, load_settings
    from reports.anomalies import AlertHistoryAnomalies
    from reports.build import build_report
    from reports.model import ReportSources
    from reports.period import PeriodError, current_month, parse_period
    from reports.render import FormatUnavailable, render
    from store.clock import SystemClock

    try:
        settings, _ = load_settings(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        return EXIT_INVALID
    if args.top < 0:
        print("error: --top must be 0 or more", file=err)
        return EXIT_USAGE
    clock = args.clock or SystemClock()
    try:
        period = parse_period(args.period) if args.period else current_month(clock.now_ms())
    except PeriodError as exc:
        print(f"error: --period: {exc}", file=err)
        return EXIT_USAGE
    try:
        side = open_read_only(settings, clock)
    except SchemaBehind as exc:
        print(f"error: {exc}", file=err)
        return EXIT_INVALID
    engine = side.engine
    try:
        ledger = ledger_for(side, settings, clock)
        now = clock.now_ms()
        factory: ForecastFactory | None = args.forecast_factory
        sources = ReportSources(ledger, ledger.book.settings, now, AlertHistoryAnomalies(engine),  # API changes too
                                factory(engine, settings, now) if factory is not None else None,
                                changes=AuditChanges(AuditLog(engine, clock)), software=VersionHistory(side.reader),
                                events=RecordedEvents(MarkerStore(engine, clock)),
                                evaluations=StoredEvaluations(EvaluationStore(engine).between))
        rendered = render(build_report(sources, period, args.top), args.format)
    except FormatUnavailable as exc:
        print(f"error: {exc}", file=err)
        return EXIT_INVALID
    finally:
        side.close()
    target = args.out or ("-" if args.format == "csv" else rendered.filename)
    try:
        _write(rendered.content, target, out, binary=args.format != "csv")
    except OSError as exc:
        print(f"error: cannot write {target}: {exc}", file=err)
        return EXIT_INVALID
    if target != "-":
        print(f"wrote {target} ({len(rendered.content):,} bytes)", file=out)
    return EXIT_OK


def register(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    forecast: ForecastFactory | None = None,
    clock: Clock | None = None,
) -> None:
    """Adds ``report``; ``clock`` (default: the system clock) is for tests."""
    report = sub.add_parser("report", help="finance report for a period: PDF, CSV or XLSX")
    report.add_argument("--period", help="2026-11, 2026-11-05 or 2026-11-01..2026-11-15 (UTC); default: this month")
    report.add_argument("--format", default="pdf", choices=["pdf", "csv", "xlsx"])
    report.add_argument("--out", help="file to write ('-' for standard output); default: stdout for CSV, "
                                      "./infermeter-cost-<period>.<format> otherwise")
    report.add_argument("--top", type=int, default=10, help="how many cost anomalies to list (default 10)")
    report.set_defaults(func=cmd_report, forecast_factory=forecast, clock=clock)


if __name__ == "__main__":  # pragma: no cover - `python -m reports.cli` for a quick look
    parser = argparse.ArgumentParser(prog="infermeter")
    parser.add_argument("--config")
    register(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args()
    raise SystemExit(ns.func(ns, sys.stdout, sys.stderr))
