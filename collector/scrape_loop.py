"""One loop per target: collect at its interval, label, stale-mark, and append.

Every interval writes, whatever happened, ``up`` (1 or 0), ``scrape_duration_seconds`` and
``scrape_samples_scraped`` for the target, as Prometheus does. A failed scrape is an empty
scrape: every series the previous scrape returned gets a staleness marker, so instant queries
stop showing values that are no longer being measured; so does a series that merely vanished
from a good scrape. Target labels (``job``, ``instance``, configured ones) are attached to every
series; a scraped label of the same name is kept as ``exported_<name>``.

Timing: the first scrape waits a random part of the interval (spreading targets apart), then
ticks stay on a fixed grid; a scrape that overruns skips the ticks it missed rather than
firing them in a burst. Time and randomness come in from outside.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np
from opentelemetry.trace import NoOpTracer, Span, StatusCode, Tracer

from collector.source import Health, ScrapeResult, Source
from store.clock import Clock
from store.interfaces import Appender
from store.types import STALE_NAN, SampleBatch, SeriesKey

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TargetSpec:
    job: str
    url: str
    instance: str
    interval_s: float = 15.0
    timeout_s: float = 10.0
    labels: tuple[tuple[str, str], ...] = ()
    body_limit: int = 64 * 1024 * 1024
    series_limit: int = 0
    # Which kind of Source serves the target ("http" exposition, or a local source such as
    # "nvml"), with that source's own options as sorted (name, value) pairs.
    kind: str = "http"
    options: tuple[tuple[str, str], ...] = ()

    def target_labels(self) -> tuple[tuple[str, str], ...]:
        return (("instance", self.instance), ("job", self.job), *self.labels)


@dataclass(slots=True)
class TargetStatus:
    spec: TargetSpec
    health: Health = field(default_factory=lambda: Health.down("pending", "not scraped yet"))
    last_scrape_ms: int = 0
    last_duration_s: float = 0.0
    scrapes: int = 0
    failures: int = 0
    failures_by_reason: dict[str, int] = field(default_factory=dict)
    samples: int = 0
    # How late the last scrape started against its tick: a busy event loop shows here first.
    lag_s: float = 0.0


class ScrapeLoop:
    def __init__(
        self,
        spec: TargetSpec,
        source: Source,
        append: Callable[[SampleBatch], Awaitable[object]],
        clock: Clock,
        rng: random.Random,
        canonical: Callable[[SampleBatch], SampleBatch] | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.tracer = tracer or NoOpTracer()
        self.spec = spec
        # Maps an engine's raw series onto the canonical set; both are stored.
        self.canonical = canonical
        self.source = source
        self.append = append
        self.clock = clock
        self.rng = rng
        self.status = TargetStatus(spec)
        self._labelled: dict[SeriesKey, SeriesKey] = {}
        self._previous: set[SeriesKey] = set()
        self.last_scraped = SampleBatch.empty()  # the newest scrape as the source returned it
        target = spec.target_labels()
        self._meta_keys = [
            SeriesKey("up", target),
            SeriesKey("scrape_duration_seconds", target),
            SeriesKey("scrape_samples_scraped", target),
        ]

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.spec.interval_s
        await asyncio.sleep(self.rng.uniform(0, interval))
        next_tick = loop.time()
        while True:
            self.status.lag_s = max(0.0, loop.time() - next_tick)
            await self.scrape_once()
            next_tick += interval
            now = loop.time()
            if next_tick <= now:  # overran: skip the missed ticks, keep the grid
                next_tick += (int((now - next_tick) / interval) + 1) * interval
            await asyncio.sleep(next_tick - now)

    async def scrape_once(self) -> None:
        with self.tracer.start_as_current_span(
            "scrape", attributes={"job": self.spec.job, "instance": self.spec.instance, "url": self.spec.url}
        ) as span:
            await self._scrape(span)

    async def _scrape(self, span: Span) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        ts_ms = self.clock.now_ms()
        try:
            result = await self.source.collect(started + self.spec.timeout_s)
        except Exception as exc:  # a source bug must not end the loop; it reads as a failed scrape
            log.exception("scrape of %s raised", self.spec.url)
            result = ScrapeResult.failed("error", f"{self.spec.url}: {type(exc).__name__}: {exc}")
        duration = loop.time() - started
        batch = self._assemble(result, ts_ms, duration)
        status = self.status
        status.scrapes += 1
        status.last_scrape_ms = ts_ms
        status.last_duration_s = duration
        status.samples = len(result.batch)
        if not result.health.up:
            status.failures += 1
            reason = result.health.reason or "error"
            status.failures_by_reason[reason] = status.failures_by_reason.get(reason, 0) + 1
            # One line per failed scrape (never one per bad line of a body); the same failure
            # again (a host without NVML, a target down for hours) is logged once, not forever.
            repeat = status.health == result.health
            (log.debug if repeat else log.warning)("scrape failed: job=%s %s", self.spec.job, result.health.error)
        elif not status.health.up and status.scrapes > 1:
            log.info("scrape recovered: job=%s %s", self.spec.job, self.spec.url)
        status.health = result.health
        self.last_scraped = result.batch
        span.set_attribute("up", result.health.up)
        span.set_attribute("samples", len(result.batch))
        if not result.health.up:
            span.set_status(StatusCode.ERROR, result.health.error)
        try:
            await self.append(batch)
        except Exception:
            log.exception("storing the scrape of %s failed", self.spec.url)

    def _label(self, key: SeriesKey) -> SeriesKey:
        labelled = self._labelled.get(key)
        if labelled is None:
            own = dict(key.labels)
            for name, value in self.spec.target_labels():
                if name in own:
                    own[f"exported_{name}"] = own.pop(name)
                own[name] = value
            labelled = SeriesKey(key.name, tuple(own.items()))
            if len(self._labelled) > 200_000:
                self._labelled.clear()
            self._labelled[key] = labelled
        return labelled

    def _assemble(self, result: ScrapeResult, ts_ms: int, duration_s: float) -> SampleBatch:
        scraped = result.batch
        if self.canonical is not None and len(scraped):
            try:
                mapped = self.canonical(scraped)
            except Exception:  # a mapping bug must not cost the raw samples
                log.exception("mapping the scrape of %s to canonical metrics failed", self.spec.url)
                mapped = SampleBatch.empty()
            if len(mapped):
                scraped = _concat(scraped, mapped)
        keys = [self._label(k) for k in scraped.keys]
        current = set(keys)
        gone = [k for k in self._previous if k not in current]
        self._previous = current
        n_keys = len(keys)
        all_keys = keys + gone + self._meta_keys
        up = 1.0 if result.health.up else 0.0
        meta_values = [up, duration_s, float(len(scraped))]
        key_index = np.concatenate(
            [
                np.asarray(scraped.key_index, np.int64),
                np.arange(n_keys, n_keys + len(gone) + 3, dtype=np.int64),
            ]
        )
        ts = np.concatenate([np.asarray(scraped.ts_ms, np.int64), np.full(len(gone) + 3, ts_ms, np.int64)])
        values = np.concatenate(
            [np.asarray(scraped.values, np.float64), np.full(len(gone), STALE_NAN), np.asarray(meta_values)]
        )
        return SampleBatch(all_keys, key_index, ts, values)


def _concat(a: SampleBatch, b: SampleBatch) -> SampleBatch:
    return SampleBatch(
        [*a.keys, *b.keys],
        np.concatenate([np.asarray(a.key_index, np.int64), np.asarray(b.key_index, np.int64) + len(a.keys)]),
        np.concatenate([np.asarray(a.ts_ms, np.int64), np.asarray(b.ts_ms, np.int64)]),
        np.concatenate([np.asarray(a.values, np.float64), np.asarray(b.values, np.float64)]),
    )


def appender_call(appender: Appender) -> Callable[[SampleBatch], Awaitable[object]]:
    """Run a blocking appender off the event loop."""

    async def call(batch: SampleBatch) -> object:
        return await asyncio.to_thread(appender.append, batch)

    return call
