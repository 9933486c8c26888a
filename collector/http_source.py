"""Scrape a Prometheus text endpoint over HTTP (0.0.4 or OpenMetrics, gzip or not).

Limits are enforced while reading, not after: a body larger than ``body_limit`` (measured
decompressed) is abandoned at that byte, and a parse yielding more than ``series_limit``
series is refused, each with ``up=0``. The whole request -- connect, headers and every body
byte -- must finish before the deadline, so a target that accepts and never answers, or drips
one byte a second, costs one timeout and nothing more.

Transport: plain ``http://`` targets are fetched by :class:`~collector.http_client.PlainHttpClient`
over one kept-alive connection per target (a small fraction of httpx's CPU per request);
``https``, targets that answer with a redirect (followed from then on by httpx) and targets
that a proxy from the environment applies to go through the shared httpx client; a target with
its own TLS settings (CA, client certificate, server name) gets an httpx client of its own.
Credentials (:mod:`collector.scrape_auth`) go in an ``Authorization`` header, re-read per scrape
from their files; a file that cannot be read fails the scrape with reason ``auth``.

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

from collector.engine_version import PATHS, EngineVersionProbe
from collector.exposition import (
    FamilyMeta,
    ParseError,
    SeriesCache,
    is_openmetrics_content_type,
    parse_exposition,
)
from collector.http_client import FetchError, PlainHttpClient, Redirect, supports
from collector.scrape_auth import CredentialError, ScrapeAuth
from collector.source import Health, ScrapeResult
from store.clock import Clock
from store.types import SampleBatch, SeriesKey

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
        auth: ScrapeAuth | None = None,
        engine: str = "none",
    ) -> None:
        self.url = url
        self.client = client
        self.clock = clock
        self.body_limit = body_limit
        self.series_limit = series_limit
        self.cache = SeriesCache()
        self.families: dict[str, FamilyMeta] = {}
        self.auth = auth
        self.headers = HEADERS
        self._own_client: httpx.AsyncClient | None = None
        self._setup_error: str | None = None
        if auth is not None and auth.has_tls:
            try:
                self._own_client = httpx.AsyncClient(verify=auth.ssl_context(), follow_redirects=True)
                self.client = self._own_client
            except (OSError, ValueError) as exc:  # a missing or bad CA/certificate file: every scrape says so
                self._setup_error = f"{url}: TLS settings unusable: {exc}"
        self.probe = EngineVersionProbe(url, engine, self._get) if engine in PATHS else None
        self.plain: PlainHttpClient | None = None
        self._use_plain = plain_client and supports(url) and not _proxied(url)
        if self._use_plain:
            self.plain = PlainHttpClient(url, body_limit=body_limit, headers=HEADERS)

    def _authorize(self) -> None:
        """The Authorization header of this scrape; a changed one rebuilds the prepared request."""
        if self.auth is None:
            return
        value = self.auth.header()
        if value == self.headers.get("Authorization"):
            return
        self.headers = {**HEADERS, "Authorization": value} if value else HEADERS
        if self.plain is not None:
            self.plain.close()
            self.plain = PlainHttpClient(self.url, body_limit=self.body_limit, headers=self.headers)

    async def collect(self, deadline: float, ts_ms: int | None = None) -> ScrapeResult:
        loop = asyncio.get_running_loop()
        now_ms = self.clock.now_ms() if ts_ms is None else ts_ms
        if self._setup_error is not None:
            return ScrapeResult.failed("tls", self._setup_error)
        try:
            self._authorize()
        except CredentialError as exc:
            return ScrapeResult.failed("auth", f"{self.url}: {exc}")
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
        if self.probe is not None:
            self.probe.poke(loop.time())
        return ScrapeResult(result, Health.ok())

    @property
    def info_keys(self) -> tuple[SeriesKey, ...]:
        """Series of value 1 that ride with every scrape (the engine's version, once known)."""
        return self.probe.keys if self.probe is not None else ()

    async def _get(self, url: str, timeout_s: float) -> tuple[int, bytes]:
        headers = {"Authorization": self.headers["Authorization"]} if "Authorization" in self.headers else None
        response = await self.client.get(url, headers=headers, timeout=timeout_s)
        return response.status_code, response.content[:1_000_000]

    def _parse(self, body: bytes, content_type: str, now_ms: int) -> SampleBatch:
        om = True if is_openmetrics_content_type(content_type) else None
        parsed = parse_exposition(body, default_ts_ms=now_ms, openmetrics=om, cache=self.cache)
        self.families = parsed.families  # the target's HELP/TYPE/UNIT as of its last good scrape
        return parsed.batch

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
        extensions = {"sni_hostname": self.auth.server_name} if self.auth and self.auth.server_name else None
        request = self.client.build_request("GET", self.url, headers=self.headers, timeout=timeout_s,
                                            extensions=extensions)
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
        if self.probe is not None:
            await self.probe.close()
        if self.plain is not None:
            self.plain.close()
        if self._own_client is not None:
            await self._own_client.aclose()
        self.cache.clear()
