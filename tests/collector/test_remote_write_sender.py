"""The remote-write sender against a receiver on loopback that fails the way real ones do:
connection refused, 503, 429 with Retry-After, then 200 -- every body arrives once, in order;
a 400 drops that body (counted) and delivery goes on."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import httpx
import numpy as np
from fastapi import FastAPI, Request, Response

from collector.remote_write.proto import encode_write_request, sample_count
from collector.remote_write.queue import DiskQueue
from collector.remote_write.sender import Backoff, Sender, retry_after_s
from store.types import SampleBatch, SeriesKey
from tests.service import free_port, run_app


def _body(value: float) -> bytes:
    key = SeriesKey.of("seq_total", job="t")
    return encode_write_request(SampleBatch([key], np.zeros(1, np.int64), np.asarray([1_800_000_000_000 + int(value)], np.int64),
                                            np.asarray([value])))


def _receiver(script: list[int], got: list[tuple[int, float]]) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/v1/write")
    async def write(request: Request) -> Response:
        body = await request.body()
        assert request.headers["content-encoding"] == "snappy"
        assert request.headers["x-prometheus-remote-write-version"] == "0.1.0"
        status = script.pop(0) if script else 200
        from infermeter.api.remote_write import decode_remote_write

        for value in decode_remote_write(body, 1 << 20).values.tolist():
            got.append((status, float(value)))
        headers = {"Retry-After": "0"} if status == 429 else {}
        return Response(status_code=status, headers=headers, content=b"bad labels" if status == 400 else b"")

    return app


def _deliver_all(queue: DiskQueue, url: str, max_records: int) -> Sender:
    async def deliver() -> Sender:
        stop = asyncio.Event()
        async with httpx.AsyncClient() as client:
            sender = Sender(url, queue, client, backoff=Backoff(0.01, 0.05), rng=random.Random(1), max_records=max_records)
            task = asyncio.create_task(sender.run(stop))
            for _ in range(400):
                await asyncio.sleep(0.02)
                if queue.stats.records == 0:
                    break
            stop.set()
            await task
        return sender

    return asyncio.run(deliver())


def test_every_body_arrives_once_in_order_through_failures(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path / "q")
    for v in range(6):
        queue.put(_body(float(v)), sample_count(_body(float(v))), now_ms=v)
    got: list[tuple[int, float]] = []
    script = [503, 429, 200, 400, 200, 500, 200, 200]
    with run_app(_receiver(script, got)) as base:
        sender = _deliver_all(queue, f"{base}/api/v1/write", max_records=1)
    delivered = [v for status, v in got if status == 200]
    assert delivered == [0.0, 2.0, 3.0, 4.0, 5.0]  # in order, once each; 1.0 was refused
    assert [v for status, v in got if status == 400] == [1.0]
    assert sender.stats.samples_sent == 5 and sender.stats.samples_dropped == 1
    assert sender.stats.retries == 3  # 503, 429, 500
    assert queue.stats.records == 0


def test_receiver_down_then_up(tmp_path: Path) -> None:
    """Connection refused keeps the body first in the queue until the receiver answers."""
    queue = DiskQueue(tmp_path / "q")
    queue.put(_body(7.0), 1, now_ms=0)
    port = free_port()
    got: list[tuple[int, float]] = []

    async def scenario() -> Sender:
        stop = asyncio.Event()
        async with httpx.AsyncClient() as client:
            sender = Sender(f"http://127.0.0.1:{port}/api/v1/write", queue, client, backoff=Backoff(0.01, 0.05),
                            rng=random.Random(2))
            task = asyncio.create_task(sender.run(stop))
            await asyncio.sleep(0.5)
            assert queue.stats.records == 1 and sender.stats.retries > 0 and "Connect" in sender.stats.last_error
            stop.set()
            await task
        return sender

    asyncio.run(scenario())
    reopened = DiskQueue(tmp_path / "q")
    assert [r.samples for r in reopened.peek(5)] == [1]  # still there for the next process
    with run_app(_receiver([], got)) as base:
        async def again() -> None:
            stop = asyncio.Event()
            async with httpx.AsyncClient() as client:
                task = asyncio.create_task(Sender(f"{base}/api/v1/write", reopened, client).run(stop))
                for _ in range(200):
                    await asyncio.sleep(0.02)
                    if reopened.stats.records == 0:
                        break
                stop.set()
                await task

        asyncio.run(again())
    assert got == [(200, 7.0)]


def test_retry_after_forms() -> None:
    assert retry_after_s("3", 0) == 3.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0) == 10.0
    assert retry_after_s("soon", 0) is None and retry_after_s(None, 0) is None


def test_a_backlog_goes_out_in_one_request_and_a_refusal_drops_that_request(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path / "q")
    for v in range(6):
        queue.put(_body(float(v)), 1, now_ms=v)
    got: list[tuple[int, float]] = []
    with run_app(_receiver([503, 200], got)) as base:
        sender = _deliver_all(queue, f"{base}/api/v1/write", max_records=4)
    # 4 bodies per request: refused once (retried), then 0..3 together, then 4..5
    assert got == [(503, 0.0), (503, 1.0), (503, 2.0), (503, 3.0), (200, 0.0), (200, 1.0), (200, 2.0), (200, 3.0),
                   (200, 4.0), (200, 5.0)]
    assert sender.stats.samples_sent == 6 and queue.stats.records == 0

    for v in range(6, 9):
        queue.put(_body(float(v)), 1, now_ms=v)
    got.clear()
    with run_app(_receiver([400], got)) as base:
        sender = _deliver_all(queue, f"{base}/api/v1/write", max_records=64)
    assert got == [(400, 6.0), (400, 7.0), (400, 8.0)]
    assert sender.stats.samples_dropped == 3 and queue.stats.records == 0


def test_queued_bodies_join_without_recompressing_into_what_snappy_decodes_as_one() -> None:
    """Bodies of different sizes (one past snappy's 64 KiB block, full of back-references)
    joined as compressed bytes decode to the bodies' bytes one after the other."""
    import cramjam

    from collector.remote_write.queue import Record
    from collector.remote_write.sender import _joined

    rng = random.Random(7)
    raws = [b"".join(f'gpu_{i % 13}{{uuid="GPU-{rng.randrange(10**6)}"}} {rng.random()}\n'.encode() for i in range(n))
            for n in (1, 40, 6000, 300)]
    records = [Record(1, i, bytes(cramjam.snappy.compress_raw(raw)), 1, 0) for i, raw in enumerate(raws)]
    joined = _joined(records)
    assert bytes(cramjam.snappy.decompress_raw(joined)) == b"".join(raws)
    assert len(raws[2]) > 65536 and len(joined) < 0.75 * sum(map(len, raws))
    assert _joined(records[:1]) == records[0].payload
