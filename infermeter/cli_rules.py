"""``infermeter rules check|test|backtest|export-prometheus`` and ``infermeter cost recompute``."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from alerts.rulefile import RuleFileError, load_rule_file
from infermeter.config_file import ConfigError, load_settings
from store.durations import parse_duration_ms

if TYPE_CHECKING:
    from forecast.service import ForecastService

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def cmd_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    failed = 0
    for path in args.files:
        try:
            groups = load_rule_file(path)
        except RuleFileError as exc:
            for problem in exc.problems:
                print(problem, file=err)
            print(f"{path}: FAILED: {len(exc.problems)} problem(s)", file=err)
            failed += 1
            continue
        count = sum(len(g.rules) for g in groups)
        print(f"{path}: SUCCESS: {count} rules found in {len(groups)} groups", file=out)
    return EXIT_INVALID if failed else EXIT_OK


def cmd_test(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from alerts.unittest import run_test_file

    failed = 0
    for path in args.files:
        try:
            failures = run_test_file(path)
        except RuleFileError as exc:
            for problem in exc.problems:
                print(problem, file=err)
            failed += 1
            continue
        except (OSError, KeyError, ValueError) as exc:
            print(f"{path}: cannot run: {type(exc).__name__}: {exc}", file=err)
            failed += 1
            continue
        for failure in failures:
            print(f"{path}: FAILED: {failure}", file=err)
        if failures:
            failed += 1
        else:
            print(f"{path}: SUCCESS", file=out)
    return EXIT_INVALID if failed else EXIT_OK


def cmd_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from alerts.export import export_yaml
    from alerts.export_tests import unit_tests_yaml
    from alerts.thresholds import Thresholds
    from infermeter.alerting import load_rule_groups

    try:
        settings, _ = load_settings(args.config)
        groups = load_rule_groups(settings, args.config)
    except (ConfigError, RuleFileError) as exc:
        print(str(exc), file=err)
        return EXIT_INVALID
    text = export_yaml(groups, settings.alerts.evaluation_interval)
    if not args.out:
        out.write(text)
        return EXIT_OK
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "infermeter-rules.yml").write_text(text)
    print(f"wrote {folder / 'infermeter-rules.yml'}", file=out)
    if settings.alerts.default_rules and settings.alerts.thresholds == Thresholds():
        (folder / "infermeter-rules.test.yml").write_text(unit_tests_yaml("infermeter-rules.yml"))
        print(f"wrote {folder / 'infermeter-rules.test.yml'} (promtool test rules / infermeter rules test)", file=out)
    else:
        print("no unit-test file: it covers the default pack at default thresholds only", file=err)
    return EXIT_OK


def cmd_backtest(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from prometheus_client import CollectorRegistry

    from alerts.engine import RuleEngine
    from alerts.state import Transition
    from infermeter.alerting import load_rule_groups
    from infermeter.cli_store import SchemaBehind, open_read_only
    from store.clock import ManualClock, SystemClock

    try:
        settings, _ = load_settings(args.config)
        groups = load_rule_groups(settings, args.config)
        if args.rules:
            groups = [g for path in args.rules for g in load_rule_file(path)]
        since = parse_duration_ms(args.since)
        step = parse_duration_ms(args.step)
    except (ConfigError, RuleFileError) as exc:
        print(str(exc), file=err)
        return EXIT_INVALID
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    try:
        side = open_read_only(settings, SystemClock())
    except SchemaBehind as exc:
        print(f"error: {exc}", file=err)
        return EXIT_INVALID
    try:
        now = SystemClock().now_ms()
        start = (now - since) // step * step
        clock = ManualClock(start)
        rules = RuleEngine(groups, side.source, clock, CollectorRegistry())
        transitions: list[tuple[str, Transition]] = []
        t = start
        while t <= now:
            clock.set(t)
            for group in groups:
                transitions.extend((group.name, tr) for tr in rules.evaluate_group(group, t))
            t += step
    finally:
        side.close()
    fired = [(g, tr) for g, tr in transitions if tr.to_state in ("firing", "resolved")]
    print(f"# rules replayed over the last {args.since} every {args.step}: {len(fired)} firing/resolved transitions", file=out)
    for group_name, tr in fired:
        labels = ",".join(f"{k}={v}" for k, v in sorted(tr.labels.items()) if k != "alertname")
        print(f"{_when(tr.at_ms)}  {tr.to_state:8}  {group_name}/{tr.labels.get('alertname', '')}  {{{labels}}}  value={tr.value:g}", file=out)
    failing = {key: h.last_error for key, h in rules.health.items() if h.health == "err"}
    for key, error in failing.items():
        print(f"rule {key} failed: {error}", file=err)
    return EXIT_OK


def cmd_cost_recompute(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:

    from infermeter.api.params import BadParam, parse_time_ms
    from infermeter.cli_store import SchemaBehind, ledger_for, read_only_store
    from store.clock import SystemClock

    try:
        settings, _ = load_settings(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        return EXIT_INVALID
    clock = SystemClock()
    try:
        since = parse_time_ms("--since", args.since, clock.now_ms())
    except BadParam as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    try:
        with read_only_store(settings, clock) as side:
            ledger = ledger_for(side, settings, clock)
            hours = ledger.recompute(since)
            total = sum(float(r["dollars"] or 0) for r in ledger.spend(since - since % 3_600_000, clock.now_ms() + 3_600_000))
    except SchemaBehind as exc:
        print(f"error: {exc}", file=err)
        return EXIT_INVALID
    print(f"re-priced {hours} hour(s) since {_when(since)}: {total:.2f} {settings.cost.currency} in total", file=out)
    return EXIT_OK


def forecast_service(args: argparse.Namespace) -> ForecastService:
    """The forecast service over the configured store (for `infermeter forecast`)."""

    from forecast.ids import QUANTITIES, SeriesId
    from forecast.service import ForecastService
    from infermeter.cli_store import SchemaBehind, ledger_for, open_read_only
    from infermeter.forecasting import LedgerHistory
    from store.clock import SystemClock

    try:
        settings, _ = load_settings(args.config)
    except ConfigError as exc:
        raise ValueError("\n".join(str(p) for p in exc.problems)) from None
    clock = SystemClock()
    try:
        side = open_read_only(settings, clock)
    except SchemaBehind as exc:
        raise ValueError(str(exc)) from None
    ledger = ledger_for(side, settings, clock)
    fleet = [SeriesId(q, "fleet") for q in QUANTITIES]
    return ForecastService(LedgerHistory(ledger), side.engine, clock, series=fleet)


def stored_spend_forecast(engine: object, settings: object, now_ms: int) -> object:
    """For `infermeter report`: the stored fleet spend forecast, cut to a window."""
    from forecast.ids import SeriesId
    from forecast.repository import ForecastRepository
    from reports.forecast import rest_of_period

    latest = ForecastRepository(engine).latest(SeriesId("spend"))  # type: ignore[arg-type]
    if latest is None:
        return None
    return lambda lo, hi: rest_of_period(latest, lo, hi)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    rules = sub.add_parser("rules", help="alerting rules: check, test, backtest, export for Prometheus")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    check = rsub.add_parser("check", help="validate rule files; problems as file:line:column")
    check.add_argument("files", nargs="+")
    check.set_defaults(func=cmd_check)
    test = rsub.add_parser("test", help="run rule unit tests in promtool's format")
    test.add_argument("files", nargs="+")
    test.set_defaults(func=cmd_test)
    back = rsub.add_parser("backtest", help="replay the rules over stored history; list when each would have fired")
    back.add_argument("--since", default="7d")
    back.add_argument("--step", default="1m")
    back.add_argument("--rules", action="append", help="rule file instead of the configured rules (repeatable)")
    back.set_defaults(func=cmd_backtest)
    export = rsub.add_parser("export-prometheus", help="the rules as Prometheus alerting rules over exported names")
    export.add_argument("--out", help="folder for infermeter-rules.yml and its promtool unit tests (default: stdout)")
    export.set_defaults(func=cmd_export)

    cost = sub.add_parser("cost", help="cost ledger")
    csub = cost.add_subparsers(dest="cost_command", required=True)
    recompute = csub.add_parser("recompute", help="re-price history with the price book in effect now")
    recompute.add_argument("--since", required=True, help="RFC 3339, unix seconds, or now-<duration>")
    recompute.set_defaults(func=cmd_cost_recompute)
