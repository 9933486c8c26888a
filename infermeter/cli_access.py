"""``infermeter tokens create|list|rotate|revoke|hash`` and ``infermeter audit``: the first admin
token comes from here (or INFERMETER_API_TOKEN); later ones also through the API."""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TextIO

from access.audit import Actor, AuditLog
from access.principal import Principal, Role
from access.tokens import TokenError, TokenRecord, TokenStore
from infermeter.config_file import ConfigError, load_settings
from store.clock import SystemClock
from store.durations import parse_duration_ms

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def cli_actor() -> Actor:
    """Who a local command acts as: the OS user, with the admin role (they hold the database)."""
    return Actor(Principal(f"cli:{getpass.getuser()}", Role.ADMIN, "cli"), "cli")


def _when(ms: int | None) -> str:
    return "-" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


@contextmanager
def _opened(config: str | None) -> Iterator[tuple[TokenStore, AuditLog, Actor]]:
    from infermeter.cli_store import migrated

    settings, _ = load_settings(config)
    with migrated(settings) as engine:
        clock = SystemClock()
        yield TokenStore(engine, clock, lambda: []), AuditLog(engine, clock), cli_actor()


def _row(record: TokenRecord) -> str:
    return (f"{record.id:>5}  {record.name:<24} {record.role.label:<9} created {_when(record.created_ms)} by "
            f"{record.created_by}  expires {_when(record.expires_ms)}  revoked {_when(record.revoked_ms)}")


def cmd_tokens(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.tokens_command == "hash":
        secret = sys.stdin.readline().strip() if args.token in (None, "-") else args.token
        print(hashlib.sha256(secret.encode()).hexdigest(), file=out)
        return EXIT_OK
    try:
        with _opened(args.config) as (tokens, audit, actor):
            return _administer(args, tokens, audit, actor, out)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        return EXIT_INVALID
    except (TokenError, ValueError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE


def _administer(args: argparse.Namespace, tokens: TokenStore, audit: AuditLog, actor: Actor, out: TextIO) -> int:
    now = tokens.clock.now_ms()
    if args.tokens_command == "create":
        expires = now + parse_duration_ms(args.expires_in) if args.expires_in else None
        record, secret = tokens.create(args.name, Role.named(args.role), actor.principal.name, expires)
        audit.record(actor, "token.create", f"token/{record.id}", None, record.public())
        print(secret, file=out)
        print(f"token {record.id} ({record.name}, {record.role.label}) created; the secret above is shown once",
              file=sys.stderr)
    elif args.tokens_command == "list":
        for record in tokens.all():
            print(_row(record), file=out)
    elif args.tokens_command == "rotate":
        grace = parse_duration_ms(args.grace)
        old, new, secret = tokens.rotate(args.id, actor.principal.name, grace)
        audit.record(actor, "token.rotate", f"token/{old.id}", old.public(), new.public())
        print(secret, file=out)
        print(f"token {new.id} replaces {old.id}, which stays valid until {_when(old.expires_ms)}", file=sys.stderr)
    elif args.tokens_command == "revoke":
        before = tokens.get(args.id).public()
        after = tokens.revoke(args.id).public()
        audit.record(actor, "token.revoke", f"token/{args.id}", before, after)
        print(f"token {args.id} revoked", file=out)
    return EXIT_OK


def cmd_audit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        with _opened(args.config) as (_tokens, audit, _actor):
            since = audit.clock.now_ms() - parse_duration_ms(args.since)
            for entry in audit.entries(since_ms=since, action=args.action, limit=args.limit):
                if args.json:
                    print(json.dumps(entry, sort_keys=True), file=out)
                    continue
                print(f"{_when(entry['at_ms'])}  {entry['actor']} ({entry['role']}) from {entry['address']}  "
                      f"{entry['action']} {entry['object']}", file=out)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        return EXIT_INVALID
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    tokens = sub.add_parser("tokens", help="API tokens: create, list, rotate, revoke, hash")
    tsub = tokens.add_subparsers(dest="tokens_command", required=True)
    create = tsub.add_parser("create", help="a new token; prints the secret once")
    create.add_argument("--name", required=True)
    create.add_argument("--role", required=True, choices=["viewer", "operator", "admin"])
    create.add_argument("--expires-in", help="duration, e.g. 90d (default: never)")
    tsub.add_parser("list", help="every token (never the secrets)")
    rotate = tsub.add_parser("rotate", help="a new token for the same name and role; the old one lives --grace more")
    rotate.add_argument("id", type=int)
    rotate.add_argument("--grace", default="24h")
    revoke = tsub.add_parser("revoke", help="end a token now")
    revoke.add_argument("id", type=int)
    hashp = tsub.add_parser("hash", help="the SHA-256 of a token, for security.tokens in the config (stdin: -)")
    hashp.add_argument("token", nargs="?")
    tokens.set_defaults(func=cmd_tokens)

    audit = sub.add_parser("audit", help="the audit log: who changed what, newest first")
    audit.add_argument("--since", default="30d")
    audit.add_argument("--action", help="only this action, e.g. price.set, token.create, silence.create")
    audit.add_argument("--limit", type=int, default=1000)
    audit.add_argument("--json", action="store_true", help="one JSON object per line")
    audit.set_defaults(func=cmd_audit)
