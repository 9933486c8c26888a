"""The part of Prometheus's alert templating that rules use: ``{{ $labels.x }}``, ``{{ $value }}``,
``{{ $value | humanize }}``, ``| humanizePercentage``, ``| humanizeDuration`` and
``printf "%.2f" $value``. The same strings work unchanged in exported Prometheus rules."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal

_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
_VAR = re.compile(r"^\$(labels\.([a-zA-Z_][a-zA-Z0-9_]*)|value|labels)$")
_PRINTF = re.compile(r'^printf\s+"((?:[^"\\]|\\.)*)"\s+(\S+)$')
_FILTERS = ("humanize", "humanizePercentage", "humanizeDuration", "humanize1024", "title", "toUpper", "toLower")


class TemplateError(ValueError):
    pass


def _parse_action(action: str) -> tuple[str, list[str], str | None]:
    """(variable, pipe filters, printf format) of one ``{{ ... }}``."""
    parts = [p.strip() for p in action.split("|")]
    head, filters = parts[0], parts[1:]
    fmt = None
    printf = _PRINTF.match(head)
    if printf:
        fmt, head = printf.group(1), printf.group(2)
    if not _VAR.match(head):
        raise TemplateError(f"unsupported template expression {{{{ {action} }}}}: use $labels.<name> or $value")
    for f in filters:
        if f not in _FILTERS:
            raise TemplateError(f"unknown template function {f!r} (known: {', '.join(_FILTERS)})")
    return head, filters, fmt


def check_template(text: str) -> None:
    if text.count("{{") != text.count("}}"):
        raise TemplateError("unbalanced {{ }}")
    for match in _ACTION.finditer(text):
        _parse_action(match.group(1))


def humanize(value: float) -> str:
    if value == 0 or math.isnan(value) or math.isinf(value):
        return f"{value:.4g}"
    if abs(value) >= 1:
        for prefix in ("", "k", "M", "G", "T", "P", "E"):
            if abs(value) < 1000:
                return f"{value:.4g}{prefix}"
            value /= 1000
        return f"{value:.4g}Z"
    for prefix in ("", "m", "u", "n", "p"):
        if abs(value) >= 1:
            return f"{value:.4g}{prefix}"
        value *= 1000
    return f"{value:.4g}f"


def humanize_duration(seconds: float) -> str:
    if math.isnan(seconds) or math.isinf(seconds):
        return f"{seconds:.4g}"
    if abs(seconds) < 1:
        return humanize(seconds) + "s"
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes else []
    parts += [f"{secs}s"] if secs or not parts else []
    return sign + " ".join(parts)


def render(text: str, labels: Mapping[str, str], value: float) -> str:
    """Expand a template; an unknown label expands to "" as in Prometheus."""

    def one(match: re.Match[str]) -> str:
        head, filters, fmt = _parse_action(match.group(1))
        current: object
        if head == "$value":
            current = value
        elif head == "$labels":
            current = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
        else:
            current = labels.get(head.split(".", 1)[1], "")
        if fmt is not None:
            try:
                current = _go_printf(fmt, current)
            except (TypeError, ValueError):
                current = str(current)
        for f in filters:
            current = _apply_filter(f, current)
        return current if isinstance(current, str) else _format_value(current)

    return _ACTION.sub(one, text)


def _go_printf(fmt: str, arg: object) -> str:
    return fmt.replace("%v", "%s") % (arg,)


def _apply_filter(name: str, current: object) -> str:
    try:
        number = float(current)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if name == "humanize":
        return humanize(number)
    if name == "humanize1024":
        for prefix in ("", "Ki", "Mi", "Gi", "Ti", "Pi"):
            if abs(number) < 1024:
                return f"{number:.4g}{prefix}"
            number /= 1024
        return f"{number:.4g}Ei"
    if name == "humanizePercentage":
        return f"{number * 100:.4g}%"
    if name == "humanizeDuration":
        return humanize_duration(number)
    text = str(current)
    return {"title": text.title(), "toUpper": text.upper(), "toLower": text.lower()}[name]


def _format_value(value: object) -> str:
    """As Go's fmt prints a float64 (what Prometheus's templates show for ``$value``): shortest
    digits, exponent form below 1e-4 and from 1e+06 (``1e+06``, ``2.5e-05``)."""
    if not isinstance(value, float):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    digits = Decimal(repr(value))
    exponent = digits.adjusted()
    if -4 <= exponent < 6:
        text = format(digits, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa = format(digits.scaleb(-exponent).normalize(), "f")
    return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
