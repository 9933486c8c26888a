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

Per scrape, nothing that stays the same between scrapes is recomputed: while the source
returns the same keys in the same order (the parser hands back the very same list), the
labelled keys, the bookkeeping keys and the store's ids for all of them (learnt from the
appender after the first store) are reused, and a scrape costs a few numpy concatenations on
top of parsing. Batches go to the store through :func:`appender_call` -- several scrapes per
store append, each scrape returning only once its samples are committed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from opentelemetry.trace import NoOpTracer, Span, StatusCode, Tracer

from collector.appender import BatchingAppender
from collector.scrape_auth import ScrapeAuth
from collector.scrape_time import ScrapeTimeAligner
from collector.source import Health, ScrapeResult, Source
from collector.target_gpus import target_gpu_key
from store.clock import Clock
from store.interfaces import SampleSink
from store.types import STALE_NAN, Int64Array, SampleBatch, SeriesKey

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
    # The GPUs (indices or UUIDs on the target's host) its engine runs on, from the config:
    # written with every scrape as TARGET_GPU_INFO series, which the cost ledger reads.
    gpus: tuple[str, ...] = ()
    # Credentials and TLS of an http target (its url and instance carry no userinfo).
    auth: ScrapeAuth | None = None

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
        self.stamps = ScrapeTimeAligner(spec.interval_s)
        self._previous: list[SeriesKey] = []  # the last layout's keys: those missing next are stale
        self._carried: dict[SeriesKey, SeriesKey] = {}  # labelled keys of layouts dropped by _sync_info
        self._layout: _Layout | None = None
        self._spare: _Layout | None = None  # the last layout with series, for a target back from a failure
        self.last_scraped = SampleBatch.empty()  # the newest scrape as the source returned it
        target = spec.target_labels()
        self._target_pairs = tuple(target)
        names = [name for name, _ in target]
        self._target_names = frozenset(names) if len(set(names)) == len(names) else None
        self._meta_keys = [
            SeriesKey("up", target),
            SeriesKey("scrape_duration_seconds", target),
            SeriesKey("scrape_samples_scraped", target),
            *(target_gpu_key(spec.job, spec.instance, gpu, "config", target) for gpu in spec.gpus),
        ]
        self._base_meta = len(self._meta_keys)
        self._raw_info: tuple[SeriesKey, ...] = ()  # the source's info series (value 1), as it gives them
        self._info: tuple[SeriesKey, ...] = ()  # ... and as labelled
        self._info_gone: list[SeriesKey] = []

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
        ts_ms = self.stamps.stamp(self.clock.now_ms())
        try:
            result = await self.source.collect(started + self.spec.timeout_s, ts_ms)
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
        else:
            self._learn_ids(batch)

    def _known_labels(self) -> dict[SeriesKey, SeriesKey]:
        """Raw and canonical keys -> their labelled keys, as the current and spare layouts hold
        them. Built only when a scrape's keys change (rare); a map kept between changes held
        a dict entry for every series (~100 bytes each), read by nothing while keys repeat."""
        known, self._carried = self._carried, {}
        for layout in (self._spare, self._layout):
            if layout is not None:
                known.update(zip([*layout.raw, *layout.mapped], layout.keys[: layout.n_keys]))
        return known

    def _label(self, key: SeriesKey, known: dict[SeriesKey, SeriesKey]) -> SeriesKey:
        """``key`` with the target's labels: the key labelled before where ``known`` has it (the
        store holds that very object), else a new one, added to ``known``."""
        labelled = known.get(key)
        if labelled is None:
            if self._target_names is not None and not any(n in self._target_names for n, _ in key.labels):
                # no clash: the scraped pairs and the target's, shared (not copied) by the new key
                labelled = SeriesKey(key.name, key.labels + self._target_pairs)
            else:
                own = dict(key.labels)
                for name, value in self.spec.target_labels():
                    if name in own:
                        own[f"exported_{name}"] = own.pop(name)
                    own[name] = value
                labelled = SeriesKey(key.name, tuple(own.items()))
            known[key] = labelled
        return labelled

    def _sync_info(self) -> None:
        """A source's info series (an engine's version, learnt in the background) ride with the
        bookkeeping series; when they change the layout is rebuilt and the old ones marked stale.
        Per scrape this is one comparison of the source's tuple (most sources have none)."""
        raw = getattr(self.source, "info_keys", ())
        if raw == self._raw_info:
            return
        known = dict(zip(self._raw_info, self._info))
        self._raw_info = raw
        info = tuple(self._label(k, known) for k in raw)
        if info == self._info:
            return
        self._info_gone += [k for k in self._info if k not in info]
        self._info = info
        self._meta_keys = [*self._meta_keys[: self._base_meta], *info]
        self._carried = self._known_labels()  # the next layout labels its keys with the same objects
        self._layout = self._spare = None

    def _assemble(self, result: ScrapeResult, ts_ms: int, duration_s: float) -> SampleBatch:
        self._sync_info()
        scraped = result.batch
        mapped: SampleBatch | None = None
        if self.canonical is not None and len(scraped):
            try:
                mapped = self.canonical(scraped)
            except Exception:  # a mapping bug must not cost the raw samples
                log.exception("mapping the scrape of %s to canonical metrics failed", self.spec.url)
            if mapped is not None and not len(mapped):
                mapped = None
        raw_keys = scraped.keys
        mapped_keys = mapped.keys if mapped is not None else ()
        layout = self._layout
        gone: list[SeriesKey] = []
        if layout is None or not layout.same(raw_keys, mapped_keys):
            # New series, vanished ones, another order, or back after a failed scrape (the
            # layout from before the failure is kept for that): label, find the vanished.
            spare = self._spare
            if layout is not None and layout.n_keys:
                self._spare = layout
            if spare is not None and spare.same(raw_keys, mapped_keys):
                layout = spare
            else:
                known = self._known_labels()
                keys = [self._label(k, known) for k in raw_keys]
                keys += [self._label(k, known) for k in mapped_keys]
                layout = _Layout(raw_keys, mapped_keys, [*keys, *self._meta_keys], len(keys))
            current = layout.keys[: layout.n_keys]
            if self._previous:
                kept = set(current)
                gone = [k for k in self._previous if k not in kept]
            gone += self._info_gone
            self._info_gone = []
            self._previous = current
            self._layout = layout
        n_keys = layout.n_keys
        n_meta = len(self._meta_keys)
        n_extra = len(gone) + n_meta
        up = 1.0 if result.health.up else 0.0
        meta_values = [up, duration_s, float(len(scraped))] + [1.0] * (n_meta - 3)
        if gone:
            all_keys = layout.keys[:n_keys] + gone + self._meta_keys
            key_ids = None
        else:
            all_keys = layout.keys
            key_ids = layout.ids
        key_parts = [np.asarray(scraped.key_index, np.int64)]
        ts_parts = [np.asarray(scraped.ts_ms, np.int64)]
        value_parts = [np.asarray(scraped.values, np.float64)]
        if mapped is not None:
            key_parts.append(np.asarray(mapped.key_index, np.int64) + len(raw_keys))
            ts_parts.append(np.asarray(mapped.ts_ms, np.int64))
            value_parts.append(np.asarray(mapped.values, np.float64))
        key_parts.append(np.arange(n_keys, n_keys + n_extra, dtype=np.int64))
        ts_parts.append(np.full(n_extra, ts_ms, np.int64))
        value_parts.append(np.asarray([STALE_NAN] * len(gone) + meta_values, np.float64))
        return SampleBatch(
            all_keys, np.concatenate(key_parts), np.concatenate(ts_parts), np.concatenate(value_parts), key_ids
        )

    def _learn_ids(self, batch: SampleBatch) -> None:
        """Keep the store ids an appender resolved for the current layout's keys."""
        layout, ids = self._layout, batch.key_ids
        if layout is None or layout.ids is not None or ids is None or len(ids) != len(batch.keys):
            return
        if batch.keys is layout.keys:
            layout.ids = np.asarray(ids, np.int64)
        elif len(batch.keys) >= layout.n_keys + len(self._meta_keys):  # the layout's keys, vanished ones, meta keys
            layout.ids = np.concatenate([ids[: layout.n_keys], ids[-len(self._meta_keys) :]]).astype(np.int64)


class _Layout:
    """What one scrape's key lists became (target labels attached, bookkeeping keys after
    them) and, once known, their store ids; reused while the next scrape returns the same
    keys in the same order -- the usual case, which then costs no per-series work."""

    __slots__ = ("raw", "mapped", "keys", "n_keys", "ids")

    def __init__(self, raw: Sequence[SeriesKey], mapped: Sequence[SeriesKey], keys: list[SeriesKey], n_keys: int) -> None:
        self.raw, self.mapped, self.keys, self.n_keys = raw, mapped, keys, n_keys
        self.ids: Int64Array | None = None

    def same(self, raw: Sequence[SeriesKey], mapped: Sequence[SeriesKey]) -> bool:
        # Keys are interned by the parser and the mapper, so equal lists are mostly
        # identical objects and the comparison is pointer by pointer.
        return (raw is self.raw or _equal(raw, self.raw)) and (mapped is self.mapped or _equal(mapped, self.mapped))


def _equal(a: Sequence[SeriesKey], b: Sequence[SeriesKey]) -> bool:
    if len(a) != len(b):
        return False
    return (a if isinstance(a, list) else list(a)) == (b if isinstance(b, list) else list(b))


def appender_call(appender: SampleSink) -> Callable[[SampleBatch], Awaitable[object]]:
    """Store scrapes through a blocking appender, off the event loop: several scrapes per
    store append, each call returning once its batch is committed (:mod:`collector.appender`)."""
    return BatchingAppender(appender)
