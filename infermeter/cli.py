"""``infermeter`` command line: up, agent, worker, check-config, db upgrade, query, load, plan, rules, cost, forecast, report."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

from infermeter.config_file import ConfigError, load_settings, settings_or_report
from store.durations import format_duration, parse_duration_ms

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def cmd_check_config(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        _, source = load_settings(args.file or args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        print(f"FAILED: {len(exc.problems)} problem(s)", file=err)
        return EXIT_INVALID
    print(f"{source}: OK", file=out)
    return EXIT_OK


def cmd_db_upgrade(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from infermeter import db
    from store.engine import create_store_engine

    settings = settings_or_report(args.config, err)
    if settings is None:
        return EXIT_INVALID
    engine = create_store_engine(settings.store.url, sqlite_synchronous=settings.store.sqlite_synchronous)
    try:
        revision = db.upgrade(engine, args.revision)
    finally:
        engine.dispose()
    print(f"database at revision {revision} ({engine.url.render_as_string(hide_password=True)})", file=out)
    return EXIT_OK


# Libraries that log one INFO line per HTTP request (the baseline load, the worker's health
# checks, scrapes that go through httpx): quiet below DEBUG, or they drown the service's own log.
REQUEST_LOGGERS = ("httpx", "httpcore")


def configure_logging(level: str) -> None:
    """The service's log format at ``level``; per-request client lines only at DEBUG."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if level.upper() == "DEBUG" else logging.WARNING)


def cmd_up(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from infermeter.malloc_tuning import tune_malloc

    tune_malloc()  # before any thread starts
    import uvicorn

    from infermeter.api import create_app
    from infermeter.runtime import build_runtime

    settings = settings_or_report(args.config, err)
    if settings is None:
        print("refusing to start: the config is invalid", file=err)
        return EXIT_INVALID
    configure_logging(settings.logging.level)
    runtime = build_runtime(settings, config_path=args.config)
    app = create_app(runtime)
    from infermeter.gc_tuning import tune_for_service

    tune_for_service()
    host = args.host or settings.server.host
    port = args.port or settings.server.port
    server = settings.server
    scheme = "https" if server.tls_cert_file else "http"
    if not runtime.access.auth.enabled() and host not in ("127.0.0.1", "localhost", "::1"):
        logging.getLogger("infermeter").warning("listening on %s without any token or OIDC issuer: everyone who reaches the port is an admin; "
                    "create a token (`infermeter tokens create --role admin`) or set INFERMETER_API_TOKEN", host)
    print(f"infermeter listening on {scheme}://{host}:{port} (store: {runtime.engine.url.render_as_string(hide_password=True)})", file=out, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=settings.logging.level.lower(), access_log=False,
                ssl_certfile=server.tls_cert_file, ssl_keyfile=server.tls_key_file)
    return EXIT_OK


def cmd_agent(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import uvicorn

    from infermeter.lean import skip_httpx_cli

    skip_httpx_cli()
    from infermeter.agent import build_agent, create_agent_app
    from infermeter.malloc_tuning import tune_malloc

    tune_malloc()  # before any thread starts
    settings = settings_or_report(args.config, err)
    if settings is None:
        print("refusing to start: the config is invalid", file=err)
        return EXIT_INVALID
    configure_logging(settings.logging.level)
    try:
        agent = build_agent(settings)
    except ValueError as exc:
        print(f"refusing to start: {exc}", file=err)
        return EXIT_INVALID
    app = create_agent_app(agent)
    # No gc_tuning here: with its raised young-generation threshold the agent's per-scrape garbage
    # piled up (RSS grew 0.4 MiB/s, measured); the default collector keeps it flat.
    host = args.host or settings.agent.host
    port = args.port or settings.agent.port
    receivers = ", ".join(rw.url for rw in settings.agent.remote_write)
    print(f"infermeter agent on http://{host}:{port} shipping to {receivers}", file=out, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=settings.logging.level.lower(), access_log=False, loop="asyncio", http="h11", ws="none")
    return EXIT_OK


def cmd_query(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from infermeter.cli_store import SchemaBehind, read_only_store
    from store.clock import SystemClock
    from store.reader import RangeQuery
    from store.series_index import Matcher, Selector

    settings = settings_or_report(args.config, err)
    if settings is None:
        return EXIT_INVALID
    try:
        matchers = tuple(Matcher.parse(m) for m in args.match)
        since = parse_duration_ms(args.since)
        step = parse_duration_ms(args.step) if args.step else max(1000, since // 60 // 1000 * 1000)
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    clock = SystemClock()
    try:
        with read_only_store(settings, clock) as side:
            now = clock.now_ms()
            by = tuple(x for x in args.by.split(",") if x) if args.by else None
            query = RangeQuery(Selector(args.metric, matchers), now - since, now, step, args.fn, by, args.agg)
            results = side.reader.range(query)
    except SchemaBehind as exc:
        print(f"error: {exc}", file=err)
        return EXIT_INVALID
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    if not results:
        print(f"no series match {args.metric}{{{', '.join(args.match)}}} in the last {args.since}", file=err)
        return EXIT_OK
    print(f"# {args.fn} per {format_duration(step)}, last {args.since}, {len(results)} series", file=out)
    _print_table(results, out)
    return EXIT_OK


def _print_table(results: Sequence[object], out: TextIO) -> None:
    from store.reader import SeriesResult

    typed = [r for r in results if isinstance(r, SeriesResult)]
    names = [
        ",".join(f"{k}={v}" for k, v in sorted(r.labels.items()) if k != "__name__") or r.labels.get("__name__", "")
        for r in typed
    ]
    widths = [max(len(n), 12) for n in names]
    print("TIME (UTC)           " + "  ".join(n.rjust(w) for n, w in zip(names, widths)), file=out)
    stamps = typed[0].ts_ms.tolist()
    for i, ts in enumerate(stamps):
        cells = [float(r.values[i]) for r in typed]
        if all(math.isnan(c) for c in cells):
            continue
        when = datetime.fromtimestamp(ts / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
        text = ["-" if math.isnan(c) else f"{c:.6g}" for c in cells]
        print(f"{when}  " + "  ".join(t.rjust(w) for t, w in zip(text, widths)), file=out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infermeter", description=__doc__)
    parser.add_argument("--config", help="config file (default: ./infermeter.yaml or $INFERMETER_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run the service: API, store and background loops")
    up.add_argument("--host")
    up.add_argument("--port", type=int)
    up.set_defaults(func=cmd_up)

    agent = sub.add_parser("agent", help="collect on this node and ship by remote write (no store, rules or dashboard)")
    agent.add_argument("--host")
    agent.add_argument("--port", type=int)
    agent.set_defaults(func=cmd_agent)

    check = sub.add_parser("check-config", help="validate a config file; every problem as file:line: field: message")
    check.add_argument("file", nargs="?")
    check.set_defaults(func=cmd_check_config)

    dbp = sub.add_parser("db", help="database schema")
    dbsub = dbp.add_subparsers(dest="db_command", required=True)
    upgrade = dbsub.add_parser("upgrade", help="migrate the database to the newest schema")
    upgrade.add_argument("--revision", default="head")
    upgrade.set_defaults(func=cmd_db_upgrade)

    query = sub.add_parser("query", help="print a metric as a table")
    query.add_argument("metric")
    query.add_argument("--match", action="append", default=[], help="label matcher k=v, k!=v, k=~re, k!~re")
    query.add_argument("--since", default="1h", help="how far back (default 1h)")
    query.add_argument("--step", help="step (default: since/60)")
    query.add_argument("--fn", default="avg", choices=["last", "avg", "min", "max", "sum", "count", "rate", "increase"])
    query.add_argument("--by", help="comma-separated labels to aggregate by")
    query.add_argument("--agg", default="sum", choices=["sum", "avg", "min", "max", "count"])
    query.set_defaults(func=cmd_query)

    from infermeter import cli_rules

    cli_rules.register(sub)
    from infermeter import cli_access

    cli_access.register(sub)
    from infermeter import cli_releases

    cli_releases.register(sub)
    from infermeter import cli_evaluate

    cli_evaluate.register(sub)
    from infermeter import cli_validate

    cli_validate.register(sub)
    from forecast import cli as forecast_cli

    forecast_cli.register(sub, cli_rules.forecast_service)
    from worker import cli as worker_cli

    worker_cli.register(sub)
    from reports import cli as report_cli

    report_cli.register(sub, forecast=cli_rules.stored_spend_forecast)  # type: ignore[arg-type]
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from remote.client import EngineError

    try:
        code: int = args.func(args, out or sys.stdout, err or sys.stderr)
    except EngineError as exc:  # store.backend remote: the engine is down or refused a read
        print(f"error: {exc}", file=err or sys.stderr)
        return EXIT_INVALID
    return code


if __name__ == "__main__":
    raise SystemExit(main())
