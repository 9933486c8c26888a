"""The part of Prometheus's alert templating that rules use: ``{{ $labels.x }}``, ``{{ $value }}``,
``{{ $value | humanize }}``, ``| humanizePercentage``, ``| humanizeDuration`` and
``printf "%.2f" $value`` and ``{{ if $labels.x }} .. {{ else }} .. {{ end }}``. The same strings
work unchanged in exported Prometheus rules."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import cast

_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
_VAR = re.compile(r"^\$(labels\.([a-zA-Z_][a-zA-Z0-9_]*)|value|labels)$")
_PRINTF = re.compile(r'^printf\s+"((?:[^"\\]|\\.)*)"\s+(\S+)$')
_FILTERS = ("humanize", "humanizePercentage", "humanizeDuration", "humanize1024", "title", "toUpper", "toLower")


_Action = tuple[str, list[str], "str | None"]  # variable, pipe filters, printf format


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


# A parsed template: literal text, one action, or an ``{{ if X }} .. {{ else }} .. {{ end }}``.
class _If:
    __slots__ = ("variable", "then", "otherwise")

    def __init__(self, variable: str) -> None:
        self.variable = variable
        self.then: list[object] = []
        self.otherwise: list[object] = []


_CONTROL = re.compile(r"^(if|else|end)\b\s*(.*)$")


def _parse(text: str) -> list[object]:
    """Literal text and actions, with ``if``/``else``/``end`` (nestable) as Go's text/template
    writes them; the condition is one variable, true when non-empty and non-zero."""
    if text.count("{{") != text.count("}}"):
        raise TemplateError("unbalanced {{ }}")
    root: list[object] = []
    stack: list[tuple[_If, list[object]]] = []
    body = root
    pos = 0
    for match in _ACTION.finditer(text):
        if match.start() > pos:
            body.append(text[pos : match.start()])
        pos = match.end()
        action = match.group(1)
        control = _CONTROL.match(action)
        if control is None:
            body.append(_parse_action(action))
            continue
        word, rest = control.group(1), control.group(2).strip()
        if word == "if":
            if not _VAR.match(rest):
                raise TemplateError(f"unsupported condition {{{{ if {rest} }}}}: use $labels.<name> or $value")
            node = _If(rest)
            body.append(node)
            stack.append((node, body))
            body = node.then
        elif not stack:
            raise TemplateError(f"{{{{ {word} }}}} without {{{{ if }}}}")
        elif word == "else":
            if body is stack[-1][0].otherwise:
                raise TemplateError("two {{ else }} in one {{ if }}")
            body = stack[-1][0].otherwise
        else:
            body = stack.pop()[1]
    if stack:
        raise TemplateError("{{ if }} without {{ end }}")
    if pos < len(text):
        body.append(text[pos:])
    return root


def check_template(text: str) -> None:
    _parse(text)


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
    return "".join(_render(_parse(text), labels, value))


def _variable(head: str, labels: Mapping[str, str], value: float) -> object:
    if head == "$value":
        return value
    if head == "$labels":
        return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return labels.get(head.split(".", 1)[1], "")


def _render(nodes: list[object], labels: Mapping[str, str], value: float) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, _If):
            current = _variable(node.variable, labels, value)
            truthy = bool(current) and not (isinstance(current, float) and math.isnan(current))
            out.extend(_render(node.then if truthy else node.otherwise, labels, value))
        else:
            assert isinstance(node, tuple)
            head, filters, fmt = cast(_Action, node)
            current = _variable(head, labels, value)
            if fmt is not None:
                try:
                    current = _go_printf(fmt, current)
                except (TypeError, ValueError):
                    current = str(current)
            for f in filters:
                current = _apply_filter(f, current)
            out.append(current if isinstance(current, str) else _format_value(current))
    return out


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
