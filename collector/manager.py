"""Owns the scrape loops: starts, stops and reconciles them with the configured targets.

``apply(specs)`` is what a reload calls: loops whose target is unchanged keep running (and keep
their cadence and staleness memory), removed or changed ones are cancelled, new ones start.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import cast

import httpx
from opentelemetry.trace import NoOpTracer, Tracer

from collector.http_source import HttpExpositionSource
from collector.mapping import CanonicalMapper, Engine
from collector.scrape_loop import ScrapeLoop, TargetSpec, TargetStatus
from collector.source import Source
from store.clock import Clock
from store.types import SampleBatch

log = logging.getLogger(__name__)


SourceFactory = Callable[[TargetSpec], Source]


def _canonical_for(spec: TargetSpec) -> Callable[[SampleBatch], SampleBatch] | None:
    """Exposition targets map known engines onto canonical metrics (``engine`` option:
    ``auto`` detects from the metric names, ``none`` stores the raw series only)."""
    if spec.kind != "http":
        return None
    engine = dict(spec.options).get("engine", "auto")
    if engine == "none":
        return None
    mapper = CanonicalMapper()
    fixed = None if engine == "auto" else cast(Engine, engine)
    return lambda batch: mapper.map(batch, fixed)


class ScrapeManager:
    """``factories`` builds the Source for each kind of target; "http" is built in."""

    def __init__(
        self,
        append: Callable[[SampleBatch], Awaitable[object]],
        clock: Clock,
        rng: random.Random | None = None,
        factories: dict[str, SourceFactory] | None = None,
    ) -> None:
        self.append = append
        self.clock = clock
        self.rng = rng or random.Random()
        self._client: httpx.AsyncClient | None = None
        self._loops: dict[TargetSpec, tuple[ScrapeLoop, asyncio.Task[None]]] = {}
        self.factories: dict[str, SourceFactory] = {"http": self._http_source, **(factories or {})}
        self.tracer: Tracer = NoOpTracer()

    def _http_source(self, spec: TargetSpec) -> Source:
        return HttpExpositionSource(
            spec.url, self._http(), self.clock, body_limit=spec.body_limit, series_limit=spec.series_limit,
            auth=spec.auth, engine=dict(spec.options).get("engine", "none"),
        )

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # Limits per request come from each target's timeout; no pool-wide cap on waiting.
            self._client = httpx.AsyncClient(
                follow_redirects=True, limits=httpx.Limits(max_connections=None, max_keepalive_connections=64)
            )
        return self._client

    async def apply(self, specs: list[TargetSpec]) -> None:
        wanted = set(specs)
        for spec in [s for s in self._loops if s not in wanted]:
            await self._stop(spec)
        for spec in specs:
            if spec in self._loops:
                continue
            factory = self.factories.get(spec.kind)
            if factory is None:
                log.error("no source for target kind %r (%s); skipped", spec.kind, spec.url)
                continue
            loop = ScrapeLoop(
                spec, factory(spec), self.append, self.clock, self.rng, _canonical_for(spec), self.tracer
            )
            task = asyncio.create_task(loop.run(), name=f"scrape {spec.job} {spec.url}")
            self._loops[spec] = (loop, task)
        log.info("scraping %d targets", len(self._loops))

    async def _stop(self, spec: TargetSpec) -> None:
        loop, task = self._loops.pop(spec)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await loop.source.close()

    async def stop(self) -> None:
        for spec in list(self._loops):
            await self._stop(spec)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def latest(self, kind: str) -> list[SampleBatch]:
        """The newest scraped batch of every target of one kind (before target labels)."""
        return [loop.last_scraped for loop, _ in self._loops.values() if loop.spec.kind == kind]

    def metadata(self) -> dict[str, set[tuple[str, str, str]]]:
        """(type, help, unit) per metric family, as the exposition targets' last scrapes said
        (``untyped`` reported as ``unknown``, as Prometheus's metadata API does)."""
        out: dict[str, set[tuple[str, str, str]]] = {}
        for loop, _ in self._loops.values():
            for name, meta in getattr(loop.source, "families", {}).items():
                kind = "unknown" if meta.type in ("untyped", "") else meta.type
                out.setdefault(name, set()).add((kind, meta.help, meta.unit))
        return out

    def statuses(self) -> list[TargetStatus]:
        return [loop.status for loop, _ in self._loops.values()]
