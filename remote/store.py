"""Where ``up`` writes when its samples live in a remote engine: every batch (scraped series,
pushed samples, recording-rule results, cost series) is encoded once and put into a durable
on-disk queue; a sender thread delivers the queue with remote write (the agent's queue and
sender, :mod:`collector.remote_write`), so an engine outage or a restart loses nothing the
queue took, and the appending thread never waits on the network.

``close(flush=True)`` gives the sender a few seconds to empty the queue; what is left stays on
disk and goes out after the next start.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import httpx
import numpy as np
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from collector.remote_write.encoder import WriteRequestEncoder
from collector.remote_write.metrics import queue_families
from collector.remote_write.queue import DiskQueue
from collector.remote_write.sender import Sender, SenderStats
from store.append_result import AppendResult, RejectReason
from store.clock import Clock
from store.types import SampleBatch

log = logging.getLogger(__name__)


class RemoteSampleStore:
    def __init__(
        self,
        write_url: str,
        queue_dir: Path,
        clock: Clock,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        flush_s: float = 0.0,
        max_queue_bytes: int = 512 * 1024 * 1024,
        external_labels: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
        max_future_ms: int = 10 * 60_000,
        transport_factory: Callable[[], httpx.AsyncClient] = httpx.AsyncClient,
    ) -> None:
        self.write_url = write_url
        self.clock = clock
        self.max_future_ms = max_future_ms
        self.queue = DiskQueue(queue_dir, max_queue_bytes)
        self.external_labels = dict(external_labels or {})
        self.encoder = WriteRequestEncoder(self.external_labels)
        self._encode_lock = threading.Lock()  # the encoder's label cache is not thread-safe
        self._headers = dict(headers or {})
        self._timeout_s = timeout_s
        self._flush_s = flush_s
        self._rng = rng
        self._client_factory = transport_factory
        self.sender: Sender | None = None
        self.samples_enqueued = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # -- the appender --------------------------------------------------------------------------
    def append(self, batch: SampleBatch) -> AppendResult:
        """Queue a batch; returns once it is on disk (fsync), as the embedded store's append.
        Samples stamped more than ``max_future_ms`` ahead are rejected, as the embedded store does."""
        if not len(batch):
            return AppendResult()
        ts = np.asarray(batch.ts_ms, np.int64)
        too_new = ts > self.clock.now_ms() + self.max_future_ms
        refused = int(np.count_nonzero(too_new))
        if refused:
            batch = batch.select(~too_new)
            if not len(batch):
                return AppendResult(rejected={RejectReason.TOO_NEW: refused})
        with self._encode_lock:
            body = self.encoder.encode(batch)
        self.queue.put(body, len(batch), self.clock.now_ms())
        self.samples_enqueued += len(batch)
        loop, sender = self._loop, self.sender
        if loop is not None and sender is not None:
            loop.call_soon_threadsafe(sender.wake.set)
        return AppendResult(accepted=len(batch), rejected={RejectReason.TOO_NEW: refused} if refused else {})

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        if self._thread is not None:
            return
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="remote-write", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.run(self._deliver())

    async def _deliver(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self._client_factory() as client:
            self.sender = Sender(self.write_url, self.queue, client, headers=self._headers, timeout_s=self._timeout_s,
                                 rng=self._rng, wall_clock=lambda: self.clock.now_ms() / 1000,
                                 flush_s=self._flush_s)
            self._ready.set()
            await self.sender.run(self._stop)

    def close(self, flush: bool = True, flush_timeout_s: float = 5.0) -> None:
        if self._thread is None:
            return
        if flush:
            deadline = time.monotonic() + flush_timeout_s
            while self.queue.stats.records and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.queue.stats.records:
                log.warning("%d samples still queued for %s; they go out after the next start",
                            self.queue.stats.samples, self.write_url)
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)
        self._thread.join(10)
        self._thread = None

    def maintain(self) -> None:
        """Nothing to compact or expire here: the engine keeps its own retention."""


class RemoteStoreCollector(Collector):
    """``infermeter_remote_write_*``: the queue in front of the engine, read at scrape time."""

    def __init__(self, store: RemoteSampleStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        s = self.store
        stats = s.sender.stats if s.sender is not None else SenderStats()
        yield from queue_families("infermeter_remote_write", [(s.write_url, s.queue, stats)], s.clock.now_ms())
        yield CounterMetricFamily("infermeter_remote_write_samples_enqueued", "Samples written to the queue.",
                                  value=s.samples_enqueued)
