"""``infermeter validate``: the acceptance check (see :mod:`infermeter.validate`), stored in the
database so runs form a history (``GET /api/v1/validations``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from typing import TextIO
from urllib.parse import urlsplit

from infermeter.config_file import settings_or_report
from infermeter.validate import Options, Result, function_phase, performance_phase
from store.clock import Clock, SystemClock
from store.durations import parse_duration_ms

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def _seconds(text: str | None, default: float) -> float:
    return parse_duration_ms(text) / 1000 if text else default


def _shares(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated numbers") from None
    if len(values) < 2 or any(v < 0 for v in values) or sum(values) <= 0:
        raise argparse.ArgumentTypeError("at least two non-negative shares, not all zero")
    return values


def hosts_of(url: str) -> list[str]:
    host = urlsplit(url).hostname or ""
    return [socket.gethostname()] if host in LOOPBACK else [host, host.split(".")[0]]


def cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from worker.loadgen.traces import read_trace

    clock: Clock = getattr(args, "clock", None) or SystemClock()
    settings = settings_or_report(args.config, err)
    if settings is None:
        return EXIT_FAIL
    try:
        t = settings.alerts.thresholds
        opts = Options(
            url=args.url.rstrip("/"), endpoint=args.endpoint, models=tuple(args.model or ()), requests=args.requests,
            concurrency=args.concurrency, max_tokens=args.max_tokens, load_requests=args.load_requests,
            load_concurrency=args.load_concurrency, seed=args.seed,
            ttft_p99_s=_seconds(args.ttft_p99, t.ttft_p99_seconds), itl_p99_s=_seconds(args.itl_p99, t.inter_token_p99_seconds),
            e2e_p99_s=_seconds(args.e2e_p99, t.e2e_p99_seconds),
            max_failure_rate=args.max_failure_rate if args.max_failure_rate is not None else t.failure_rate,
            trace=read_trace(args.trace) if args.trace else None,
        )
        if args.min_utilization is not None:
            t = t.model_copy(update={"utilization_target": args.min_utilization})
    except (OSError, ValueError) as exc:
        print(f"validate: {exc}", file=err)
        return EXIT_USAGE
    result = Result(opts.url, opts.models[0] if len(opts.models) == 1 else "", clock.now_ms())
    try:
        print(f"function: {opts.requests} requests to {opts.url} ...", file=err)
        asyncio.run(function_phase(opts, result))
        print(f"performance: {opts.load_requests} requests at concurrency {opts.load_concurrency} ...", file=err)
        asyncio.run(performance_phase(opts, result))
    except KeyboardInterrupt:
        result.interrupted = True
        print("validate: interrupted; keeping what was measured", file=err)
    result.ended_ms = clock.now_ms()
    stored = _fleet_and_store(args, settings, clock, result, t, err)
    text = result.markdown() + (f"\nstored as validation {stored}\n" if stored else "")
    print(text, end="", file=out)
    for path, content in ((args.markdown, text), (args.html, result.html()),
                          (args.json, json.dumps(result.to_json(), indent=2, default=str))):
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(content)
    return EXIT_OK if result.verdict == "pass" else EXIT_FAIL


def _fleet_and_store(args: argparse.Namespace, settings: object, clock: Clock, result: Result, thresholds: object,
                     err: TextIO) -> int | None:
    """The fleet phase from the store, and the run kept in the database (None: not stored)."""
    from infermeter.cli_store import SchemaBehind, open_read_only
    from infermeter.settings import Settings
    from infermeter.validations import fleet_phase
    from releases.runs import ValidationStore

    assert isinstance(settings, Settings)
    try:
        side = open_read_only(settings, clock)
    except SchemaBehind as exc:
        print(f"validate: the store cannot be read ({exc}): fleet checks skipped", file=err)
        return None
    try:
        history = ValidationStore(side.engine)
        baseline = history.get(args.baseline) if args.baseline else history.baseline(result.url, result.model)
        if args.baseline and baseline is None:
            print(f"validate: --baseline: no validation {args.baseline}; the cost check has no baseline", file=err)
        fleet_phase(side.source, result, hosts_of(result.url), thresholds, settings.cost,  # type: ignore[arg-type]
                    baseline, args.moe_expected)
        return None if args.no_store else history.add(result.to_json())
    finally:
        side.close()


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("validate", help="the acceptance check: function, performance, fleet and cost; exit 1 on a failure")
    p.add_argument("--url", required=True, help="the endpoint's base URL, e.g. http://10.0.0.5:8000")
    p.add_argument("--endpoint", choices=["completions", "chat", "generate"], default="completions",
                   help="OpenAI /v1/completions or /v1/chat/completions, or the worker's /v1/generate")
    p.add_argument("--trace", help="performance phase: replay this trace (Azure CSV or Mooncake JSONL) instead of a "
                   "closed loop")
    p.add_argument("--model", action="append", help="model to ask for (repeat: a gateway's models, checked for routing)")
    p.add_argument("--requests", type=int, default=1000, help="function phase: distinct requests (default 1000)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=16, help="function phase: max_tokens drawn from 1..this")
    p.add_argument("--load-requests", type=int, default=200, help="performance phase: requests (default 200)")
    p.add_argument("--load-concurrency", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ttft-p99", help="default alerts.thresholds.ttft_p99_seconds")
    p.add_argument("--itl-p99", help="default alerts.thresholds.inter_token_p99_seconds")
    p.add_argument("--e2e-p99", help="default alerts.thresholds.e2e_p99_seconds")
    p.add_argument("--max-failure-rate", type=float, help="default alerts.thresholds.failure_rate")
    p.add_argument("--min-utilization", type=float, help="default alerts.thresholds.utilization_target")
    p.add_argument("--baseline", type=int, help="compare cost with this validation (default: the last passed run)")
    p.add_argument("--moe-expected", type=_shares, help="expected share of each expert, e.g. 0.25,0.25,0.3,0.2 "
                   "(default: uniform)")
    p.add_argument("--json", help="write the whole result as JSON")
    p.add_argument("--markdown", help="write the summary as Markdown")
    p.add_argument("--html", help="write the summary as an HTML page")
    p.add_argument("--no-store", action="store_true", help="do not keep the run in the database")
    p.set_defaults(func=cmd_validate)
