"""Names of forecast series and horizons, as they appear in the API, the CLI and the tables.

A series is ``<quantity>:<scope>``: ``spend:fleet``, ``tokens:model=llama-3-70b``,
``cost_per_mtok:fleet``. The quantity is one of :data:`QUANTITIES`; the scope is opaque here
(the :class:`forecast.service.HistorySource` knows what it means). Cost per 1M tokens is never
read from history directly: it is derived from ``spend`` and ``tokens`` of the same scope.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Quantity = Literal["spend", "tokens", "cost_per_mtok"]
QUANTITIES: tuple[Quantity, ...] = ("spend", "tokens", "cost_per_mtok")
UNITS: dict[Quantity, str] = {"spend": "$/h", "tokens": "tokens/h", "cost_per_mtok": "$ per 1M tokens"}

HOUR_MS = 3_600_000
MAX_HORIZON_H = 168
_SCOPE = re.compile(r"^[A-Za-z0-9_.=/:@+-]{1,200}$")
_HORIZON = re.compile(r"^\s*(\d+)\s*([hd]?)\s*$")


@dataclass(frozen=True, order=True)
class SeriesId:
    quantity: Quantity
    scope: str = "fleet"

    def __post_init__(self) -> None:
        if self.quantity not in QUANTITIES:
            raise ValueError(f"unknown quantity {self.quantity!r}; expected one of {', '.join(QUANTITIES)}")
        if not _SCOPE.match(self.scope):
            raise ValueError(f"bad scope {self.scope!r}: 1-200 characters of A-Z a-z 0-9 _ . = / : @ + -")

    def __str__(self) -> str:
        return f"{self.quantity}:{self.scope}"

    @property
    def unit(self) -> str:
        return UNITS[self.quantity]

    @property
    def derived(self) -> bool:
        """True for cost per 1M tokens, which is spend / tokens of the same scope."""
        return self.quantity == "cost_per_mtok"

    def with_quantity(self, quantity: Quantity) -> SeriesId:
        return SeriesId(quantity, self.scope)

    @classmethod
    def parse(cls, text: str) -> SeriesId:
        """``"spend:fleet"``; a bare quantity means the fleet. Raises ValueError saying why."""
        quantity, sep, scope = text.strip().partition(":")
        if quantity not in QUANTITIES:
            raise ValueError(
                f"{text!r}: unknown quantity {quantity!r}; expected <quantity>:<scope> with quantity one of "
                f"{', '.join(QUANTITIES)}"
            )
        return cls(quantity, scope if sep else "fleet")


def parse_series_list(values: list[str] | tuple[str, ...]) -> list[SeriesId]:
    """Repeated and/or comma-separated series names, de-duplicated in order."""
    out: list[SeriesId] = []
    for value in values:
        for part in value.split(","):
            if part.strip():
                sid = SeriesId.parse(part)
                if sid not in out:
                    out.append(sid)
    return out


def parse_horizon(text: str, max_hours: int = MAX_HORIZON_H) -> int:
    """``"72h"``, ``"3d"`` or ``"72"`` (hours) -> hours, 1..``max_hours``."""
    match = _HORIZON.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a horizon: use hours or days such as 72h or 3d")
    hours = int(match.group(1)) * (24 if match.group(2) == "d" else 1)
    if not 1 <= hours <= max_hours:
        raise ValueError(f"{text!r} is out of range: 1h to {max_hours}h")
    return hours
