"""The agent's appender: a scrape's batch is encoded once (external labels added) and put into
every receiver's durable queue; the call returns when every queue has it on disk, so the scrape
loop's "stored" means "cannot be lost by a crash", as with the embedded store.

One writer thread does the disk work (group commit): the scrapes that finish while it writes
and fsyncs are written together with one fsync next time round, and the event loop hands each
body over with a plain queue put instead of a thread-pool job per scrape.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Mapping, Sequence

from collector.remote_write.encoder import WriteRequestEncoder
from collector.remote_write.queue import DiskQueue
from collector.remote_write.sender import Sender
from store.clock import Clock
from store.types import SampleBatch

_Pending = tuple[bytes, int, int, "asyncio.Future[None]", asyncio.AbstractEventLoop]


class QueueAppender:
    def __init__(self, senders: Sequence[Sender], external_labels: Mapping[str, str], clock: Clock) -> None:
        self.senders = list(senders)
        self.queues: list[DiskQueue] = [s.queue for s in self.senders]
        self.external_labels = dict(external_labels)
        # Batches come straight from the scrape loops, whose key lists are reused, never changed.
        self.encoder = WriteRequestEncoder(self.external_labels, reused_key_lists=True)
        self.clock = clock
        self.samples_enqueued = 0
        self._inbox: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None

    async def __call__(self, batch: SampleBatch) -> None:
        if not len(batch):
            return
        body = self.encoder.encode(batch)  # ~1 µs a sample: on the loop, like the parse before it
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        if self._writer is None:
            self._writer = threading.Thread(target=self._write, name="queue-writer", daemon=True)
            self._writer.start()
        self._inbox.put((body, len(batch), self.clock.now_ms(), done, loop))
        await done
        self.samples_enqueued += len(batch)
        for sender in self.senders:
            sender.wake.set()

    def close(self) -> None:
        """Stop the writer once what was handed over is written."""
        if self._writer is not None:
            self._inbox.put(None)
            self._writer.join(30)
            self._writer = None

    def _write(self) -> None:
        while True:
            first = self._inbox.get()
            if first is None:
                return
            group, stop = [first], False
            while True:  # everything that arrived meanwhile goes with one fsync
                try:
                    more = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                group.append(more)
            error: BaseException | None = None
            try:
                for q in self.queues:
                    q.put_many([(body, n, at) for body, n, at, _, _ in group])
            except Exception as exc:  # the scrapes waiting on it see the failure (disk full, ...)
                error = exc
            for *_, done, loop in group:
                loop.call_soon_threadsafe(_settle, done, error)
            if stop:
                return


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
