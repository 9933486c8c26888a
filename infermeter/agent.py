"""`infermeter agent`: the composition root of a node agent.

The same sources and scrape loops as `up` (NVML, NCCL logs, the configured engine targets), with
the remote-write queues behind the scrape loops instead of the store: every scrape is put into
one durable queue per receiver (``agent.remote_write``) and a sender per receiver delivers it.
No store, rules or dashboard. Its own ``/health`` and ``/metrics`` (queue depth and age, samples
sent, retried and dropped, send latency, scrape health) listen on ``agent.host:agent.port``.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from collector.manager import ScrapeManager
from collector.remote_write.appender import QueueAppender
from collector.remote_write.metrics import queue_families
from collector.remote_write.queue import DiskQueue
from collector.remote_write.sender import Sender
from infermeter.settings import Settings
from infermeter.targets import source_factories, target_specs
from infermeter.thread_cpu import ThreadCpuCollector
from store.clock import Clock, SystemClock


def queue_dir(root: Path, url: str) -> Path:
    """One folder per receiver, named after its URL (stable across restarts)."""
    return root / hashlib.sha256(url.encode()).hexdigest()[:16]


@dataclass
class Agent:
    settings: Settings
    clock: Clock
    senders: list[Sender]
    appender: QueueAppender
    scrapes: ScrapeManager
    registry: CollectorRegistry
    client: httpx.AsyncClient
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        for sender in self.senders:
            self._tasks.append(asyncio.create_task(sender.run(self._stop)))
        await self.scrapes.apply(target_specs(self.settings))

    async def stop(self) -> None:
        await self.scrapes.stop()
        await asyncio.to_thread(self.appender.close)
        self._stop.set()
        for task in self._tasks:
            await task
        await self.client.aclose()


class _AgentMetrics(Collector):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def collect(self) -> Iterator[Any]:
        a = self.agent
        now = a.clock.now_ms()
        yield from queue_families("infermeter_agent", [(s.url, s.queue, s.stats) for s in a.senders], now)
        enqueued = CounterMetricFamily("infermeter_agent_samples_enqueued", "Samples scraped and queued.")
        enqueued.add_metric([], a.appender.samples_enqueued)
        up = GaugeMetricFamily("up", "Whether the last scrape of a target worked.", labels=["job", "instance"])
        for status in a.scrapes.statuses():
            up.add_metric([status.spec.job, status.spec.instance], 1.0 if status.health.up else 0.0)
        yield from (enqueued, up)


def build_agent(settings: Settings, clock: Clock | None = None, nvml_module: Any = None,
                rng: random.Random | None = None) -> Agent:
    clock = clock or SystemClock()
    if not settings.agent.remote_write:
        raise ValueError("agent.remote_write: at least one receiver is needed (e.g. url: http://vm:8428/api/v1/write)")
    root = Path(settings.agent.queue_dir)
    client = httpx.AsyncClient()
    senders = [
        Sender(rw.url, DiskQueue(queue_dir(root, rw.url), settings.agent.max_queue_bytes), client,
               headers=rw.headers, timeout_s=rw.timeout / 1000, rng=rng, wall_clock=lambda: clock.now_ms() / 1000,
               flush_s=settings.agent.flush_interval / 1000)
        for rw in settings.agent.remote_write
    ]
    external = {"node": socket.gethostname(), **settings.agent.external_labels}
    appender = QueueAppender(senders, external, clock)
    scrapes = ScrapeManager(appender, clock, factories=source_factories(clock, nvml_module))
    registry = CollectorRegistry(auto_describe=True)
    agent = Agent(settings, clock, senders, appender, scrapes, registry, client)
    registry.register(_AgentMetrics(agent))
    registry.register(ThreadCpuCollector())
    return agent


def create_agent_app(agent: Agent) -> Starlette:
    """Two routes on plain Starlette: the agent keeps FastAPI's validation and OpenAPI layers
    (about 11 MiB of a small process) out of memory."""

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await agent.start()
        try:
            yield
        finally:
            await agent.stop()

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "receivers": [
            {"url": s.url, "queued_samples": s.queue.stats.samples, "last_error": s.stats.last_error} for s in agent.senders
        ]})

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(agent.registry), media_type="text/plain; version=0.0.4; charset=utf-8")

    routes = [Route("/health", health, methods=["GET"]), Route("/metrics", metrics, methods=["GET"])]
    return Starlette(routes=routes, lifespan=lifespan)
