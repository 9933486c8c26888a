"""Generate ``infermeter.example.yaml`` from the settings models, so that it cannot drift.

Every key of :class:`~infermeter.settings.Settings` is written with its default value and its
``Field(description=...)``; choices, bounds and durations go in a trailing comment. Empty lists
and dicts (and the lists named in :data:`EXAMPLES`) are followed by a commented-out entry under
``# example, not a default:``; with those left commented, the file loads to ``Settings()``.

    python -m infermeter.example_config            # print it
    python -m infermeter.example_config --write    # rewrite infermeter.example.yaml
    python -m infermeter.example_config --check    # exit 1 when the checked-in file differs
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import types
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from infermeter.config_file import ENV_CONFIG, ENV_OVERRIDES
from infermeter.settings import Settings
from store.durations import format_duration, parse_duration_ms

OUTPUT = Path(__file__).resolve().parent.parent / "infermeter.example.yaml"
EXAMPLE_MARK = "# example, not a default:"
REGENERATE = "python -m infermeter.example_config --write"
WIDTH = 100

# Example entries by key path ("[]" marks the items of a list). Lists and dicts that are empty
# by default and are not named here get an entry made up from their types (see _synth).
EXAMPLES: dict[str, Any] = {
    "scrape.targets": [
        {
            "job": "vllm",
            "urls": ["http://127.0.0.1:8080/metrics", "http://10.0.0.12:8080/metrics"],
            "interval": "5s",
            "timeout": "5s",
            "labels": {"cluster": "lab"},
            "engine": "vllm",
            "gpus": {"10.0.0.12:8080": ["0", "1"]},
        },
        {
            "job": "dcgm",
            "urls": ["https://gpu-node-7.internal:9400/metrics"],
            "engine": "dcgm",
            "authorization": {"credentials_file": "/etc/infermeter/dcgm-token"},
            "tls_config": {"ca_file": "/etc/infermeter/internal-ca.pem"},
        },
        {"job": "triton", "urls": ["http://10.0.0.13:8002/metrics"],
         "basic_auth": {"username": "scraper", "password_file": "/etc/infermeter/triton-password"}},
        {"job": "tgi", "urls": ["http://10.0.0.14:8080/metrics"],
         "basic_auth": {"username": "scraper", "password": "prefer-password_file"}},
        {"job": "sglang", "urls": ["http://10.0.0.15:30000/metrics"], "engine": "sglang",
         "expert_distribution": {"dump_dir": "/shared/sglang-experts", "interval": "1m", "model": "deepseek-v3",
                                 "keep_dumps": False}},
    ],
    "security.tokens": [
        {"name": "grafana", "role": "viewer",
         "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
    ],
    "security.oidc": {
        "issuer": "https://sso.example.com/realms/ops", "audience": "infermeter",
        "jwks_url": "https://sso.example.com/realms/ops/protocol/openid-connect/certs", "role_claim": "groups",
        "roles": {"infermeter-admins": "admin", "ml-oncall": "operator", "staff": "viewer"},
        "name_claim": "preferred_username", "leeway_s": 30,
    },
    "agent.remote_write": [
        {"url": "http://victoriametrics:8428/api/v1/write"},
        {"url": "http://infermeter:8000/api/v1/write", "headers": {"Authorization": "Bearer <token>"}, "timeout": "10s"},
    ],
    "agent.external_labels": {"cluster": "prod-eu-1"},
    "store.remote.headers": {"X-Scope-OrgID": "gpu-fleet"},
    "store.remote.external_labels": {"cluster": "prod-eu-1"},
    "nccl.paths": ["/var/log/training/nccl-*.log", "/var/lib/nccl-inspector/*.prom"],
    "alerts.rule_files": ["rules/extra.yml"],
    "cost.gpu_prices": [
        {"gpu_model": "H100", "purchase_class": "on_demand", "dollars_per_gpu_hour": 4.0},
        {"gpu_model": "H100", "purchase_class": "spot", "dollars_per_gpu_hour": 1.8},
        {"gpu_model": "H100", "purchase_class": "on_demand", "dollars_per_gpu_hour": 3.5,
         "effective_from": "2026-11-01T00:00:00Z"},
        {"gpu_model": "*", "purchase_class": "on_demand", "dollars_per_gpu_hour": 2.0},
    ],
    "cost.nodes": [{"host": "spot-.*", "purchase_class": "spot", "model": "llama-3-70b"}],
    "cost.budgets": [
        {"scope": "fleet", "cost_per_million_tokens": 0.8, "spend_per_period": 20000, "period": "month"},
        {"scope": "model", "model": "llama-3-70b", "cost_per_million_tokens": 1.2},
    ],
    "notify.route.routes": [{"matchers": ['severity="critical"'], "receiver": "default", "group_wait": "10s"}],
    "notify.receivers[].webhook_configs": [
        {"url": "http://127.0.0.1:9000/hook", "secret": "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
    ],
    "notify.receivers[].alertmanager_configs": [{"url": "http://127.0.0.1:9093"}],
    "notify.receivers[].slack_configs": [{"url": "https://hooks.slack.com/services/T000/B000/XXXX", "channel": "#alerts"}],
}


# -- types -----------------------------------------------------------------------------------


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """The annotation without ``Annotated[...]`` and ``| None``, and the metadata met on the way."""
    meta: list[Any] = []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            meta.extend(extra)
        elif origin in (Union, types.UnionType):
            rest = [a for a in get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation, meta
            annotation = rest[0]
        else:
            return annotation, meta


def _model(annotation: Any) -> type[BaseModel] | None:
    base, _ = _strip(annotation)
    return base if isinstance(base, type) and issubclass(base, BaseModel) else None


def _item_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a ``list[Model]`` / ``tuple[Model, ...]`` field, else None."""
    base, _ = _strip(annotation)
    if get_origin(base) in (list, tuple) and get_args(base):
        return _model(get_args(base)[0])
    return None


def _metadata(info: FieldInfo) -> list[Any]:
    return [*info.metadata, *_strip(info.annotation)[1]]


def _is_duration(info: FieldInfo) -> bool:
    return any(getattr(m, "func", None) is parse_duration_ms for m in _metadata(info))


def _choices(annotation: Any) -> list[Any]:
    base, _ = _strip(annotation)
    if get_origin(base) is Literal:
        return list(get_args(base))
    if isinstance(base, type) and issubclass(base, Enum):
        return [member.value for member in base]
    return []


_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def _note(info: FieldInfo) -> str:
    """Choices, bounds and kind of a field, for its trailing comment."""
    notes = ["required"] if info.is_required() else []
    if choices := _choices(info.annotation):
        notes.append("one of: " + ", ".join(str(c) for c in choices))
    if _is_duration(info):
        notes.append("duration")
    for m in _metadata(info):
        for attr, sign in _BOUNDS.items():
            if isinstance(m, annotated_types.BaseMetadata) and getattr(m, attr, None) is not None:
                notes.append(f"{sign} {getattr(m, attr)}")
        if isinstance(m, annotated_types.MinLen):
            notes.append(f"at least {m.min_length} long")
        if isinstance(m, annotated_types.MaxLen):
            notes.append(f"at most {m.max_length} long")
        if getattr(m, "pattern", None):
            notes.append(f"matches {m.pattern}")
    return "; ".join(notes)


# -- values ----------------------------------------------------------------------------------


def _plain(value: Any, duration: bool) -> Any:
    """A default as the config file writes it."""
    if duration and isinstance(value, int) and not isinstance(value, bool):
        return format_duration(value) if value else "0s"
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, BaseModel):
        return {name: _plain(getattr(value, name), False) for name in type(value).model_fields}
    if isinstance(value, (list, tuple)):
        return [_plain(v, duration) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, duration) for k, v in value.items()}
    return value


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False, allow_unicode=True)
    return text.removesuffix("\n...\n").strip()


def _synth(annotation: Any, meta: Sequence[Any], path: str) -> Any:
    """A made-up value of a type, for an example entry nobody wrote into EXAMPLES."""
    base, more = _strip(annotation)
    origin, args = get_origin(base), get_args(base)
    if origin in (list, tuple, set, frozenset) and args:
        return [_synth(args[0], [], path)]
    if origin is dict and len(args) == 2:
        return {"name": _synth(args[1], [], path)}
    if origin is Literal:
        return args[0]
    if isinstance(base, type) and issubclass(base, Enum):
        return next(iter(base)).value
    if isinstance(base, type) and issubclass(base, BaseModel):
        return {
            f.alias or name: _synth(f.annotation, f.metadata, f"{path}.{name}")
            for name, f in base.model_fields.items() if f.is_required()
        }
    if base is bool:
        return True
    if base in (int, float):
        lows = [1]
        for m in [*meta, *more]:
            if getattr(m, "ge", None) is not None:
                lows.append(m.ge)
            if getattr(m, "gt", None) is not None:
                lows.append(m.gt + 1)
        return base(max(lows))
    if base is str:
        return "example"
    raise TypeError(f"no example for {path}: add one to EXAMPLES in infermeter/example_config.py")


# -- rendering -------------------------------------------------------------------------------


def _comment(text: str | None, indent: int) -> list[str]:
    if not text:
        return []
    text = " ".join(text.replace("``", "`").split())
    return [" " * indent + "# " + line for line in textwrap.wrap(text, WIDTH - indent - 2, break_on_hyphens=False)]


def _fields(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    """Required fields first (the key on an item's ``- `` line), then in declaration order."""
    return sorted(model.model_fields.items(), key=lambda kv: not kv[1].is_required())


def _model_lines(obj: BaseModel, indent: int, path: str, describe: bool, examples: bool) -> list[str]:
    lines: list[str] = []
    for name, info in _fields(type(obj)):
        key = info.alias or name
        lines += _field_lines(key, getattr(obj, name), info, indent, f"{path}.{key}".lstrip("."), describe, examples)
    return lines


def _items_lines(items: Sequence[BaseModel], indent: int, path: str, describe: bool, examples: bool) -> list[str]:
    lines: list[str] = []
    for i, item in enumerate(items):
        body = _model_lines(item, indent + 2, path, describe and i == 0, examples and i == 0)
        first = next(n for n, line in enumerate(body) if not line.lstrip().startswith("#"))
        lines += [" " * indent + line.lstrip() for line in body[:first]]
        lines.append(" " * indent + "- " + body[first][indent + 2 :])
        lines += body[first + 1 :]
    return lines


def _field_lines(
    key: str, value: Any, info: FieldInfo, indent: int, path: str, describe: bool, examples: bool
) -> list[str]:
    pad = " " * indent
    lines = _comment(info.description, indent) if describe else []
    item = _item_model(info.annotation)
    if isinstance(value, BaseModel):
        lines.append(f"{pad}{key}:")
        lines += _model_lines(value, indent + 2, path, describe, examples)
    elif item is not None and value:
        lines.append(f"{pad}{key}:")
        lines += _items_lines(value, indent + 2, path + "[]", describe, examples)
    else:
        note = _note(info)
        lines.append(f"{pad}{key}: {_flow(_plain(value, _is_duration(info)))}" + (f"  # {note}" if note else ""))
    if examples and (path in EXAMPLES or (isinstance(value, (list, tuple, dict)) and not value)):
        lines += _example_lines(key, info, indent, path)
    return lines


def _example_lines(key: str, info: FieldInfo, indent: int, path: str) -> list[str]:
    raw = EXAMPLES[path] if path in EXAMPLES else _synth(info.annotation, info.metadata, path)
    item = _item_model(info.annotation)
    model = _model(info.annotation)
    value: Any
    if item is not None:
        value = [item.model_validate(entry) for entry in raw]
    elif model is not None and isinstance(raw, dict):  # an optional section, null by default
        value = model.model_validate(raw)
    else:
        value = raw
    body = _field_lines(key, value, info, 0, path, describe=True, examples=False)
    body = body[len(_comment(info.description, 0)) :]  # the description is above the default already
    pad = " " * indent
    return [pad + EXAMPLE_MARK] + [pad + "# " + line for line in body]


def _header() -> list[str]:
    width = max(len(name) for name in ENV_OVERRIDES) + 2
    return [
        "# infermeter configuration: every key, with its default and what it does.",
        f"# Generated from the settings models by `{REGENERATE}`;",
        "# do not edit by hand (tests/test_example_config.py fails when it is out of date).",
        "#",
        f"# Copy to ./infermeter.yaml (or pass --config FILE, or set {ENV_CONFIG}). Every key is optional",
        "# and every value below is the default. Blocks under \"# example, not a default:\" show the",
        "# shape of an entry (uncomment and edit them: they replace the default above them).",
        "# Durations are written 500ms, 15s, 5m, 2h, 7d or 1h30m.",
        "# Check a file with:  infermeter check-config FILE",
        "#",
        "# Environment variables override the file (use them for secrets and per-host values):",
        *[f"#   {name:<{width}}{'.'.join(where)}" for name, where in ENV_OVERRIDES.items()],
    ]


def generate(settings: Settings | None = None) -> str:
    """The example config: every key of ``Settings`` with its default (or ``settings``' value)."""
    settings = Settings() if settings is None else settings
    lines = _header()
    for name, info in _fields(Settings):
        lines.append("")
        lines += _field_lines(info.alias or name, getattr(settings, name), info, 0, info.alias or name, True, True)
    return "\n".join(line.rstrip() for line in lines) + "\n"


def uncomment_examples(text: str) -> str:
    """``text`` with every example block uncommented in place of the default above it."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() != EXAMPLE_MARK:
            out.append(line)
            i += 1
            continue
        pad = line[: len(line) - len(line.lstrip())]
        block = [lines[i + 1][len(pad) + 2 :]]
        i += 2
        while i < len(lines) and lines[i].startswith(pad + "#   "):
            block.append(lines[i][len(pad) + 2 :])
            i += 1
        key = block[0].split(":", 1)[0]
        dash = pad[:-2] + "- "
        at = next(j for j in range(len(out) - 1, -1, -1) if out[j].startswith((f"{pad}{key}:", f"{dash}{key}:")))
        first = dash if out[at].startswith(dash) else pad
        del out[at:]
        out.append(first + block[0])
        out += [pad + b for b in block[1:]]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infermeter.example_config", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {OUTPUT.name}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 when {OUTPUT.name} is out of date")
    parser.add_argument("--path", type=Path, default=OUTPUT, help="the file to write or check")
    args = parser.parse_args(argv)
    text = generate()
    if args.write:
        args.path.write_text(text, encoding="utf-8")
    elif args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.exists() else ""
        if current != text:
            print(f"{args.path} is out of date; run: {REGENERATE}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
