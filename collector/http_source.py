"""Scrape a Prometheus text endpoint over HTTP (0.0.4 or OpenMetrics, gzip or not).

Limits are enforced while reading, not after: a body larger than ``body_limit`` (measured
decompressed) is abandoned at that byte, and a parse yielding more than ``series_limit``
series is refused, each with ``up=0``. The whole request -- connect, headers and every body
byte -- must finish before the deadline, so a target that accepts and never answers, or drips
one byte a second, costs one timeout and nothing more.

Transport: plain ``http://`` targets are fetched by :class:`~collector.http_client.PlainHttpClient`
over one kept-alive connection per target (a small fraction of httpx's CPU per request);
``https``, targets that answer with a redirect (followed from then on by httpx) and targets
that a proxy from the environment applies to go through the shared httpx client.

Parsing: a body up to ``INLINE_PARSE_BYTES`` is parsed on the event loop (a millisecond or
less: cheaper than the hop to a thread and back); a larger one runs in a worker thread so it
does not stall the event loop that the other targets' loops share.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from urllib.parse import urlsplit

import httpx

from collector.exposition import ParseError, SeriesCache, is_openmetrics_content_type, parse_exposition
from collector.http_client import FetchError, PlainHttpClient, Redirect, supports
from collector.source import Health, ScrapeResult
from store.clock import Clock
from store.types import SampleBatch

log = logging.getLogger(__name__)

ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,"
    "text/plain;version=0.0.4;q=0.4,*/*;q=0.1"
)
HEADERS = {"Accept": ACCEPT, "Accept-Encoding": "gzip", "User-Agent": "infermeter"}
INLINE_PARSE_BYTES = 512 * 1024


class _TooLarge(Exception):
    pass


def _proxied(url: str) -> bool:
    """Whether a proxy from the environment (HTTP_PROXY, ALL_PROXY; NO_PROXY) applies to
    ``url``: httpx honours those, so such targets stay on httpx."""
    proxies = urllib.request.getproxies()
    if not (proxies.get("http") or proxies.get("all")):
        return False
    host = urlsplit(url).hostname or ""
    return not urllib.request.proxy_bypass(host)


class HttpExpositionSource:
    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        clock: Clock,
        *,
        body_limit: int = 64 * 1024 * 1024,
        series_limit: int = 0,
        plain_client: bool = True,
    ) -> None:
        self.url = url
        self.client = client
        self.clock = clock
        self.body_limit = body_limit
        self.series_limit = series_limit
        self.cache = SeriesCache()
        self.plain: PlainHttpClient | None = None
        if plain_client and supports(url) and not _proxied(url):
            self.plain = PlainHttpClient(url, body_limit=body_limit, headers=HEADERS)

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
        except FetchError as exc:
            if exc.reason == "too_large":
                return ScrapeResult.failed("too_large", f"{self.url}: body larger than {self.body_limit} bytes")
            if exc.reason == "connect":
                return ScrapeResult.failed("connect", f"{self.url}: cannot connect: {exc.message}")
            return ScrapeResult.failed(exc.reason, f"{self.url}: {exc.message}")
        except httpx.HTTPStatusError as exc:
            return ScrapeResult.failed("http_status", f"{self.url}: HTTP {exc.response.status_code}")
        except httpx.ConnectError as exc:
            return ScrapeResult.failed("connect", f"{self.url}: cannot connect: {exc}")
        except httpx.HTTPError as exc:
            return ScrapeResult.failed("http", f"{self.url}: {type(exc).__name__}: {exc}")
        try:
            if len(body) <= INLINE_PARSE_BYTES:
                result = self._parse(body, content_type, now_ms)
            else:
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
        if self.plain is not None:
            try:
                return await self.plain.get()
            except Redirect as moved:
                # Followed by httpx, from now on: a target that redirects keeps doing so.
                log.info("%s redirects (HTTP %d to %s); following it with httpx", self.url, moved.status, moved.location)
                self.plain.close()
                self.plain = None
        return await self._fetch_httpx(timeout_s)

    async def _fetch_httpx(self, timeout_s: float) -> tuple[bytes, str]:
        request = self.client.build_request("GET", self.url, headers=HEADERS, timeout=timeout_s)
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
        if self.plain is not None:
            self.plain.close()
        self.cache.clear()
