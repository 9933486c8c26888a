"""Report periods: ``2026-11`` (a calendar month), ``2026-11-05`` (a day), or
``2026-11-01..2026-11-15`` (whole days, end inclusive), all UTC."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from reports.model import Period

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class PeriodError(ValueError):
    """The text is not a period; the message says what is expected."""


def _ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def _day(text: str) -> date:
    if not _DAY.match(text):
        raise PeriodError(f"expected YYYY-MM-DD, got {text!r}")
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise PeriodError(f"{text!r}: {exc}") from None


def parse_period(text: str) -> Period:
    """A month, a day or a day range; raises :class:`PeriodError` saying what was expected."""
    value = text.strip()
    month = _MONTH.match(value)
    if month:
        year, mon = int(month.group(1)), int(month.group(2))
        if not 1 <= mon <= 12:
            raise PeriodError(f"{value!r}: month must be 01..12")
        first = date(year, mon, 1)
        nxt = date(year + (mon == 12), mon % 12 + 1, 1)
        return Period(value, _ms(first), _ms(nxt))
    if ".." in value:
        lo, _, hi = value.partition("..")
        start, end = _day(lo.strip()), _day(hi.strip())
        if end < start:
            raise PeriodError(f"{value!r}: the range ends before it starts")
        return Period(value, _ms(start), _ms(end + timedelta(days=1)))
    if _DAY.match(value):
        day = _day(value)
        return Period(value, _ms(day), _ms(day + timedelta(days=1)))
    raise PeriodError(f"expected a period like 2026-11, 2026-11-05 or 2026-11-01..2026-11-15, got {text!r}")


def current_month(now_ms: int) -> Period:
    now = datetime.fromtimestamp(now_ms / 1000, UTC)
    return parse_period(f"{now.year:04d}-{now.month:02d}")
