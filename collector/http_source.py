"""Scrape a Prometheus text endpoint over HTTP (0.0.4 or OpenMetrics, gzip or not).

Limits are enforced while reading, not after: a body larger than ``body_limit`` (measured
decompressed) is abandoned at that byte, and a parse yielding more than ``series_limit``
series is refused, each with ``up=0``. The whole request -- connect, headers and every body
byte -- must finish before the deadline, so a target that accepts and never answers, or drips
one byte a second, costs one timeout and nothing more. Parsing runs in a worker thread so a
large body does not stall the event loop that the other targets' loops share.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from collector.exposition import ParseError, SeriesCache, is_openmetrics_content_type, parse_exposition
from collector.source import Health, ScrapeResult
from store.clock import Clock
from store.types import SampleBatch

log = logging.getLogger(__name__)

ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,"
    "text/plain;version=0.0.4;q=0.4,*/*;q=0.1"
)


class _TooLarge(Exception):
    pass


class HttpExpositionSource:
    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        clock: Clock,
        *,
        body_limit: int = 64 * 1024 * 1024,
        series_limit: int = 0,
    ) -> None:
        self.url = url
        self.client = client
        self.clock = clock
        self.body_limit = body_limit
        self.series_limit = series_limit
        self.cache = SeriesCache()

    async def collect(self, deadline: float) -> ScrapeResult:
        loop = asyncio.get_running_loop()
        now_ms = self.clock.now_ms()
        try:
            async with asyncio.timeout_at(deadline):
                body, content_type = await self._fetch(max(0.001, deadline - loop.time()))
        except TimeoutError:
            return ScrapeResult.failed("timeout", f"{self.url}: no complete answer before the scrape timeout")
        except _TooLarge:
            return ScrapeResult.failed("too_large", f"{self.url}: body larger than {self.body_limit} bytes")
        except httpx.HTTPStatusError as exc:
            return ScrapeResult.failed("http_status", f"{self.url}: HTTP {exc.response.status_code}")
        except httpx.ConnectError as exc:
            return ScrapeResult.failed("connect", f"{self.url}: cannot connect: {exc}")
        except httpx.HTTPError as exc:
            return ScrapeResult.failed("http", f"{self.url}: {type(exc).__name__}: {exc}")
        try:
            result = await asyncio.to_thread(self._parse, body, content_type, now_ms)
        except ParseError as exc:
            return ScrapeResult.failed("parse", f"{self.url}: {exc}")
        series = len(result.keys)
        if self.series_limit and series > self.series_limit:
            return ScrapeResult.failed(
                "series_limit", f"{self.url}: {series} series exceed the limit of {self.series_limit}"
            )
        return ScrapeResult(result, Health.ok())

    def _parse(self, body: bytes, content_type: str, now_ms: int) -> SampleBatch:
        om = True if is_openmetrics_content_type(content_type) else None
        return parse_exposition(body, default_ts_ms=now_ms, openmetrics=om, cache=self.cache).batch

    async def _fetch(self, timeout_s: float) -> tuple[bytes, str]:
        request = self.client.build_request(
            "GET", self.url, headers={"Accept": ACCEPT, "Accept-Encoding": "gzip"}, timeout=timeout_s
        )
        response = await self.client.send(request, stream=True)
        try:
            response.raise_for_status()
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.body_limit:
                    raise _TooLarge()
                chunks.append(chunk)
            return b"".join(chunks), response.headers.get("content-type", "")
        finally:
            await response.aclose()

    async def close(self) -> None:
        self.cache.clear()
