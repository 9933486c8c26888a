"""``infermeter mark deploy|config|other|list|delete`` and ``infermeter compare``: record what
changed when, and put the windows before and after a change side by side."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TextIO

import numpy as np

from access.audit import AuditLog
from infermeter.api.params import BadParam, parse_time_ms
from infermeter.cli_access import cli_actor
from infermeter.config_file import settings_or_report
from releases.markers import Marker, MarkerError, MarkerStore
from store.clock import Clock, SystemClock
from store.durations import parse_duration_ms

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def row(m: Marker) -> str:
    return f"{m.id:>5}  {_when(m.at_ms)}  {m.describe()}  (by {m.actor})"


def cmd_mark(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from infermeter.cli_store import migrated

    clock: Clock = getattr(args, "clock", None) or SystemClock()
    settings = settings_or_report(args.config, err)
    if settings is None:
        return EXIT_INVALID
    try:
        with migrated(settings) as engine:
            markers, audit, actor = MarkerStore(engine, clock), AuditLog(engine, clock), cli_actor()
            now = clock.now_ms()
            if args.mark_command == "list":
                since = now - parse_duration_ms(args.since)
                for m in markers.between(since, now, model=args.model or None):
                    print(json.dumps(m.to_json(), sort_keys=True) if args.json else row(m), file=out)
                return EXIT_OK
            if args.mark_command == "delete":
                found = markers.get(args.id)
                if found is None or not markers.delete(args.id):
                    print(f"error: no marker {args.id}", file=err)
                    return EXIT_INVALID
                audit.record(actor, "event.delete", f"events/{args.id}", found.to_json(), None)
                print(f"marker {args.id} deleted", file=out)
                return EXIT_OK
            at = parse_time_ms("--at", args.at, now, now)
            m = markers.add(args.mark_command, model=args.model or "", version=args.version or "", node=args.node or "",
                            message=args.message or "", at_ms=at, actor=actor.principal.name)
            audit.record(actor, "event.create", f"events/{m.id}", None, m.to_json())
            print(row(m), file=out)
            return EXIT_OK
    except (MarkerError, BadParam, ValueError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE


def cmd_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from infermeter.cli_store import SchemaBehind, open_read_only
    from releases.windows import Windows, compare_windows, table_lines

    clock: Clock = getattr(args, "clock", None) or SystemClock()
    settings = settings_or_report(args.config, err)
    if settings is None:
        return EXIT_INVALID
    try:
        window, settle = parse_duration_ms(args.window), parse_duration_ms(args.settle)
        step = parse_duration_ms(args.step)
        side = open_read_only(settings, clock)
    except SchemaBehind as exc:
        print(f"error: {exc}", file=err)
        return EXIT_INVALID
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    try:
        marker = None
        if args.marker is not None:
            marker = MarkerStore(side.engine, clock).get(args.marker)
            if marker is None:
                print(f"error: --marker: no marker {args.marker} (infermeter mark list)", file=err)
                return EXIT_INVALID
            at = marker.at_ms
        else:
            at = parse_time_ms("--at", args.at, clock.now_ms())
        model = args.model if args.model is not None else (marker.model if marker else "")
        node = args.node if args.node is not None else (marker.node if marker else "")
        windows = Windows(at, window, settle, step)
        if windows.after[1] > clock.now_ms():
            print(f"error: the window after the change ends at {_when(windows.after[1])}, in the future: "
                  "wait, or shorten --window / --settle", file=err)
            return EXIT_INVALID
        result = compare_windows(side.source, windows, np.random.default_rng(args.seed), model=model, node=node,
                                 marker=marker)
    except BadParam as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    finally:
        side.close()
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True), file=out)
    else:
        what = marker.describe() if marker else f"the change at {_when(at)}"
        print(f"{what}: {_when(windows.before[0])}..{_when(windows.before[1])} vs "
              f"{_when(windows.after[0])}..{_when(windows.after[1])} UTC" + (f", model {model}" if model else ""),
              file=out)
        for line in table_lines(result):
            print(line, file=out)
    worse = [c.title for c in result.changes if c.verdict == "worse"]
    return EXIT_INVALID if worse and args.fail_on_worse else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    mark = sub.add_parser("mark", help="record a deploy or config change (drawn on the charts, compared by compare)")
    msub = mark.add_subparsers(dest="mark_command", required=True)
    for kind, text in (("deploy", "a model's new version"), ("config", "a config change"), ("other", "anything else")):
        p = msub.add_parser(kind, help=f"record {text}")
        p.add_argument("--model", required=kind == "deploy")
        p.add_argument("--version", required=kind == "deploy")
        p.add_argument("--node", help="the node it happened on (default: all)")
        p.add_argument("--message")
        p.add_argument("--at", help="when (unix seconds, RFC 3339 or now-<duration>; default: now)")
    listing = msub.add_parser("list", help="markers, oldest first")
    listing.add_argument("--since", default="30d")
    listing.add_argument("--model")
    listing.add_argument("--json", action="store_true")
    delete = msub.add_parser("delete", help="remove a wrong marker (audited)")
    delete.add_argument("id", type=int)
    mark.set_defaults(func=cmd_mark)

    compare = sub.add_parser("compare", help="the window before a change against the window after it")
    which = compare.add_mutually_exclusive_group(required=True)
    which.add_argument("--marker", type=int, help="a marker's id (infermeter mark list)")
    which.add_argument("--at", help="a moment instead of a marker (unix seconds, RFC 3339, now-<duration>)")
    compare.add_argument("--model", help="default: the marker's model; empty: fleet-wide")
    compare.add_argument("--node", help="limit GPU quantities to this host (default: the marker's node)")
    compare.add_argument("--window", default="1h", help="length of each window (default 1h)")
    compare.add_argument("--settle", default="5m", help="skipped after the change before measuring (default 5m)")
    compare.add_argument("--step", default="1m", help="resolution of the values compared (default 1m)")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed (results are reproducible)")
    compare.add_argument("--json", action="store_true")
    compare.add_argument("--fail-on-worse", action="store_true", help="exit 1 when a quantity got significantly worse")
    compare.set_defaults(func=cmd_compare)
