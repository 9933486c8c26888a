"""The one interface every collector implements, and what a collection returns.

A :class:`Source` is asked to ``collect(deadline)`` once per interval. It never raises for a
target problem: a dead, slow, oversized or malformed target is a :class:`ScrapeResult` whose
:class:`Health` says ``up=False`` and why (``reason`` is a stable word for metrics, ``error``
the human sentence naming what and where). The scrape loop owns timing, staleness and the
bookkeeping series; sources own transport and parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from store.types import SampleBatch


@dataclass(frozen=True, slots=True)
class Health:
    up: bool
    reason: str = ""  # e.g. timeout, connect, http_status, too_large, series_limit, parse
    error: str = ""

    @classmethod
    def ok(cls) -> Health:
        return cls(True)

    @classmethod
    def down(cls, reason: str, error: str) -> Health:
        return cls(False, reason, error)


@dataclass(slots=True)
class ScrapeResult:
    batch: SampleBatch
    health: Health

    @classmethod
    def failed(cls, reason: str, error: str) -> ScrapeResult:
        return cls(SampleBatch.empty(), Health.down(reason, error))


class Source(Protocol):
    """``deadline`` is an event-loop time (``asyncio.get_running_loop().time()``). ``ts_ms``: the
    scrape's timestamp, for samples that carry none of their own (the scrape loop's, on the
    target's schedule: :mod:`collector.scrape_time`); None: the source reads its clock."""

    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult: ...

    async def close(self) -> None: ...
