"""``infermeter evaluate``: the same workload against several endpoints, ranked by $ per 1M tokens
(see :mod:`infermeter.evaluate`)."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from cost.prices import PriceBook
from infermeter.config_file import settings_or_report
from infermeter.evaluate import Candidate, Sla, evaluate_sync, render
from store.clock import Clock, SystemClock
from store.durations import parse_duration_ms

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def cmd_evaluate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from worker.loadgen import LoadOptions
    from worker.loadgen.workload import LengthDist

    clock: Clock = getattr(args, "clock", None) or SystemClock()
    settings = settings_or_report(args.config, err)
    if settings is None:
        return EXIT_FAIL
    try:
        candidates = [Candidate.parse(text) for text in args.endpoint]
        if len({c.name for c in candidates}) != len(candidates):
            raise ValueError("--endpoint: two candidates share a name (give name=...)")
        sla = Sla(parse_duration_ms(args.sla_ttft_p99) / 1000 if args.sla_ttft_p99 else None,
                  parse_duration_ms(args.sla_itl_p99) / 1000 if args.sla_itl_p99 else None, args.max_failure_rate)
        workload = LoadOptions(
            concurrency=args.concurrency, requests=None if args.duration else args.requests, duration_s=args.duration,
            prompt=LengthDist.parse(args.prompt_tokens), output=LengthDist.parse(args.output_tokens), seed=args.seed,
            warmup=args.warmup, timeout_s=args.timeout, failure_backoff_s=0.5,
        )
    except ValueError as exc:
        print(f"evaluate: {exc}", file=err)
        return EXIT_USAGE
    result = evaluate_sync(candidates, workload, PriceBook(settings.cost), clock.now_ms(), sla)
    if result.interrupted:
        print(f"evaluate: interrupted; keeping the {len(result.rows)} candidates measured", file=err)
    text = render(result, args.format)
    if not args.no_store:
        stored = _store(settings, clock.now_ms(), result, err)
        if stored is not None:
            text += f"stored as evaluation {stored} (the finance report of the period draws it)\n" if args.format != "csv" else ""
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {args.out}", file=out)
    else:
        print(text, end="", file=out)
    if args.json:
        rows = [{"candidate": r.candidate.__dict__, "dollars_per_hour": r.dollars_per_hour,
                 "dollars_per_million_tokens": r.dollars_per_million, "error": r.error, "sla_misses": r.misses,
                 "load": r.report.to_dict() if r.report else None} for r in result.ranked()]
        best = result.best()
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"ranked": rows, "cheapest_meeting_sla": best.candidate.name if best else None,
                       "notes": result.notes}, fh, indent=2, default=str)
    return EXIT_OK if result.best() is not None and not result.interrupted else EXIT_FAIL


def _store(settings: object, now_ms: int, result: object, err: TextIO) -> int | None:
    from infermeter import db
    from infermeter.evaluate import Evaluation, summary_rows
    from infermeter.settings import Settings
    from releases.runs import EvaluationStore
    from store.engine import create_store_engine

    assert isinstance(settings, Settings) and isinstance(result, Evaluation)
    engine = create_store_engine(settings.store.url)
    try:
        if not db.is_at_head(engine):
            print("evaluate: the database is not at the newest schema (infermeter db upgrade): not stored", file=err)
            return None
        return EvaluationStore(engine).add(now_ms, summary_rows(result), result.notes)
    except Exception as exc:  # the figures are printed either way; keeping them is a bonus
        print(f"evaluate: not stored: {type(exc).__name__}: {exc}", file=err)
        return None
    finally:
        engine.dispose()


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("evaluate", help="the same workload against several endpoints, ranked by $ per 1M tokens")
    p.add_argument("--endpoint", action="append", required=True,
                   help="name=...,url=http://host:port,gpu=H100,gpus=1,class=on_demand[,endpoint=completions][,model=M]"
                   " (repeat for each candidate)")
    p.add_argument("--concurrency", type=int, default=8, help="closed-loop users (default 8)")
    p.add_argument("--requests", type=int, default=200, help="requests per candidate (default 200)")
    p.add_argument("--duration", type=float, help="seconds per candidate instead of --requests")
    p.add_argument("--prompt-tokens", default="128", help="length or distribution, as `load` takes it")
    p.add_argument("--output-tokens", default="64")
    p.add_argument("--seed", type=int, default=0, help="every candidate gets the same prompts")
    p.add_argument("--warmup", type=int, default=4, help="requests before measuring (default 4)")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--sla-ttft-p99", help="e.g. 2s (default: the default rules' 2s is not assumed; none)")
    p.add_argument("--sla-itl-p99", help="e.g. 50ms")
    p.add_argument("--max-failure-rate", type=float, default=0.01)
    p.add_argument("--format", choices=["table", "csv", "markdown"], default="table")
    p.add_argument("--out", help="write the table to this file")
    p.add_argument("--json", help="also write every figure as JSON to this file")
    p.add_argument("--no-store", action="store_true", help="do not keep the run in the database")
    p.set_defaults(func=cmd_evaluate)
