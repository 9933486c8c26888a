"""Delivers one receiver's queue, oldest first, with Prometheus remote write 1.0.

A 2xx acknowledges the bodies sent (they leave the queue; up to 64 queued bodies go in one
request). Connection errors, timeouts, 5xx and 429
are retried with capped exponential backoff and full jitter, honouring ``Retry-After``; the
body stays first in the queue, so delivery resumes in order. Any other 4xx means the receiver
will never take this body (bad labels, out-of-order samples it refuses): it is dropped, its
samples counted, and the reason logged -- retrying it forever would block everything behind it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

import httpx

from collector.remote_write.encoder import varint
from collector.remote_write.queue import DiskQueue, Record

log = logging.getLogger(__name__)

HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    "User-Agent": "infermeter-agent",
}


# Several queued bodies go out in one request (fewer round trips and cursor writes when the
# queue holds a backlog or many small scrapes); a 4xx then drops them together.
MAX_RECORDS_PER_SEND = 64
MAX_SEND_BYTES = 4 * 1024 * 1024


@dataclass
class SenderStats:
    samples_sent: int = 0
    samples_dropped: int = 0  # refused by the receiver with a 4xx other than 429
    retries: int = 0
    last_error: str = ""
    send_seconds: list[float] = field(default_factory=list)  # the latest sends' latencies


@dataclass(frozen=True)
class Backoff:
    initial_s: float = 0.5
    max_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.max_s, self.initial_s * 2 ** min(attempt, 30)))


def retry_after_s(value: str | None, now_s: float) -> float | None:
    """``Retry-After`` as seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now_s)
    except (TypeError, ValueError):
        return None


class Sender:
    def __init__(
        self,
        url: str,
        queue: DiskQueue,
        client: httpx.AsyncClient,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        backoff: Backoff = Backoff(),
        rng: random.Random | None = None,
        wall_clock: Callable[[], float] | None = None,
        max_records: int = MAX_RECORDS_PER_SEND,
        flush_s: float = 0.0,
    ) -> None:
        self.url = url
        self.queue = queue
        self.client = client
        self.headers = {**HEADERS, **(headers or {})}
        self.timeout_s = timeout_s
        self.backoff = backoff
        self.rng = rng or random.Random()
        self.wall_clock = wall_clock
        self.max_records = max_records
        self.flush_s = flush_s
        self.stats = SenderStats()
        self.wake = asyncio.Event()  # set by the appender after a put

    async def run(self, stop: asyncio.Event) -> None:
        attempt = 0
        while not stop.is_set():
            records = await asyncio.to_thread(self.queue.peek, self.max_records)
            if not records:
                self.wake.clear()
                await _wait_any(stop, self.wake, 1.0)
                continue
            if self.flush_s > 0 and len(records) < self.max_records and attempt == 0:
                # Let what is scraped in the next flush_s join this request (vmagent's
                # -remoteWrite.flushInterval): one request a second instead of one a scrape.
                await _wait_any(stop, None, self.flush_s)
                records = await asyncio.to_thread(self.queue.peek, self.max_records)
            delay = await self._send(_within(records, MAX_SEND_BYTES))
            if delay is None:
                attempt = 0
                continue
            attempt += 1
            self.stats.retries += 1
            await _wait_any(stop, None, max(delay, self.backoff.delay(attempt, self.rng)))

    async def _send(self, records: list[Record]) -> float | None:
        """None when the records left the queue (sent or dropped), else the least delay before
        the next try (0 without a Retry-After)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        samples = sum(r.samples for r in records)
        try:
            reply = await self.client.post(self.url, content=_joined(records), headers=self.headers, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.debug("remote write to %s failed: %s", self.url, self.stats.last_error)
            return 0.0
        self.stats.send_seconds = [*self.stats.send_seconds[-99:], loop.time() - started]
        if reply.is_success:
            await asyncio.to_thread(self.queue.ack_all, records)
            self.stats.samples_sent += samples
            self.stats.last_error = ""
            return None
        reason = f"{reply.status_code} {reply.text[:300].strip()}"
        self.stats.last_error = reason
        if reply.status_code == 429 or reply.status_code >= 500:
            now = self.wall_clock() if self.wall_clock else 0.0
            return retry_after_s(reply.headers.get("retry-after"), now) or 0.0
        log.warning("remote write to %s refused %d samples, dropping them: %s", self.url, samples, reason)
        await asyncio.to_thread(self.queue.ack_all, records)
        self.stats.samples_dropped += samples
        return None


def _within(records: list[Record], max_bytes: int) -> list[Record]:
    """The oldest records whose payloads fit in ``max_bytes`` (at least one)."""
    total, out = 0, list[Record]()
    for record in records:
        total += len(record.payload)
        if out and total > max_bytes:
            break
        out.append(record)
    return out


def _joined(records: list[Record]) -> bytes:
    """One WriteRequest of several: repeated fields concatenate in protobuf, and so do snappy
    block-format bodies, without decompressing them: a body is its uncompressed length (a
    varint) then literals and copies whose offsets point back into its own output only, so the
    bodies' elements, joined under the sum of their lengths, decode to the joined messages."""
    if len(records) == 1:
        return records[0].payload
    total, parts = 0, list[bytes | memoryview]([b""])
    for record in records:
        length, start = _uvarint(record.payload)
        total += length
        parts.append(memoryview(record.payload)[start:])
    parts[0] = varint(total)
    return b"".join(parts)


def _uvarint(data: bytes) -> tuple[int, int]:
    """The varint at the start of ``data`` and where what follows it begins."""
    value = shift = 0
    for i, byte in enumerate(data[:10]):
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    raise ValueError("a queued body does not start with a snappy length")


async def _wait_any(stop: asyncio.Event, other: asyncio.Event | None, timeout_s: float) -> None:
    waits = [asyncio.ensure_future(stop.wait())]
    if other is not None:
        waits.append(asyncio.ensure_future(other.wait()))
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
