"""The plain HTTP/1.1 scrape client against a raw asyncio server that answers exactly as told:
framing, encodings, limits, keep-alive and its failures, redirects (handed to httpx)."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Awaitable, Callable

import httpx
import pytest

from collector.http_client import FetchError, PlainHttpClient, Redirect, supports
from collector.http_source import HttpExpositionSource
from store import ManualClock

BODY = b'm{a="b"} 1\nn 2\n'

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, str, list[int]]:
    """A server calling ``handler(reader, writer, request_number)`` per request; the list
    counts connections."""
    connections = [0]
    requests = [0]

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections[0] += 1
        try:
            while True:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                requests[0] += 1
                await handler(reader, writer, requests[0])
                if writer.is_closing():
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/metrics?x=1", connections


def _answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _run(handler: Handler, check: Callable[[str, list[int]], Awaitable[None]]) -> None:
    async def main() -> None:
        server, url, connections = await _serve(handler)
        async with server:
            await check(url, connections)

    asyncio.run(main())


def _client(url: str, limit: int = 1_000_000) -> PlainHttpClient:
    return PlainHttpClient(url, body_limit=limit, headers={"Accept": "text/plain"})


def test_keep_alive_content_length_and_content_type() -> None:
    async def handler(_: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(_answer(BODY + str(n).encode(), "Content-Type: text/plain; version=0.0.4"))

    async def check(url: str, connections: list[int]) -> None:
        client = _client(url)
        for n in (1, 2, 3):
            body, content_type = await client.get()
            assert body == BODY + str(n).encode() and content_type == "text/plain; version=0.0.4"
        assert connections[0] == 1  # one connection for every request
        client.close()

    _run(handler, check)


def test_chunked_gzip_deflate_and_interim_answers() -> None:
    packed = gzip.compress(BODY * 100)
    raw_deflate = zlib.compressobj(wbits=-15)
    bare = raw_deflate.compress(BODY) + raw_deflate.flush()

    async def handler(_: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 1:  # chunked and gzip, in pieces, with a chunk extension and a trailer
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n")
            for i in range(0, len(packed), 7):
                piece = packed[i : i + 7]
                writer.write(f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n")
            writer.write(b"0\r\nX-Trailer: y\r\n\r\n")
        elif n == 2:  # deflate without the zlib header, as some servers send it
            writer.write(_answer(bare, "Content-Encoding: deflate"))
        else:
            writer.write(_answer(zlib.compress(BODY), "Content-Encoding: deflate"))

    async def check(url: str, connections: list[int]) -> None:
        client = _client(url)
        assert (await client.get())[0] == BODY * 100
        assert (await client.get())[0] == BODY
        assert (await client.get())[0] == BODY
        assert connections[0] == 1

    _run(handler, check)


def test_body_limit_counts_decoded_bytes() -> None:
    bomb = gzip.compress(b"#" * 200_000)

    async def handler(_: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 1:
            writer.write(_answer(bomb, "Content-Encoding: gzip"))  # small on the wire
        elif n == 2:
            writer.write(_answer(b"#" * 200_000))  # refused from its Content-Length
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"#" * 200_000)  # until EOF
            await writer.drain()
            writer.close()

    async def check(url: str, connections: list[int]) -> None:
        client = _client(url, limit=100_000)
        for _ in range(3):
            with pytest.raises(FetchError) as info:
                await client.get()
            assert info.value.reason == "too_large"
        assert connections[0] == 3  # an abandoned body is never read past: new connection each time

    _run(handler, check)


def test_errors_status_and_connection_closed_by_server() -> None:
    async def handler(_: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 1:
            writer.write(_answer(b"gone", status="503 Service Unavailable"))
        elif n == 2:
            writer.write(_answer(BODY))
            await writer.drain()
            writer.close()  # keep-alive promised, then closed while idle
        elif n == 3:
            writer.write(_answer(BODY, "Connection: close"))
        elif n == 4:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
            await writer.drain()
            writer.close()
        else:
            writer.write(b"garbage\r\n\r\n")

    async def check(url: str, connections: list[int]) -> None:
        client = _client(url)
        with pytest.raises(FetchError) as info:
            await client.get()
        assert (info.value.reason, info.value.message) == ("http_status", "HTTP 503")
        assert (await client.get())[0] == BODY
        await asyncio.sleep(0.05)
        assert (await client.get())[0] == BODY  # the closed idle connection is replaced
        with pytest.raises(FetchError, match="closed in the middle"):
            await client.get()
        with pytest.raises(FetchError, match="malformed status line"):
            await client.get()

    _run(handler, check)


def test_reused_connection_closed_as_the_request_goes_out_is_retried_once() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 2:  # read the request, then drop the connection without a byte of answer
            writer.close()
            return
        writer.write(_answer(BODY))

    async def check(url: str, connections: list[int]) -> None:
        client = _client(url)
        assert (await client.get())[0] == BODY
        assert (await client.get())[0] == BODY
        assert connections[0] == 2

    _run(handler, check)


def test_connect_error_and_unsupported_urls() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(FetchError) as info:
            await _client(f"http://127.0.0.1:{port}/metrics").get()
        assert info.value.reason == "connect"

    asyncio.run(main())
    assert supports("http://h:9400/metrics") and not supports("https://h/metrics")
    assert not supports("http://h:notaport/") and not supports("file:///x")


def test_source_follows_redirects_through_httpx_and_maps_errors() -> None:
    async def handler(_: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 1:
            writer.write(_answer(b"", "Location: /elsewhere", status="302 Found"))
        elif n == 2:  # httpx follows to /elsewhere
            writer.write(_answer(BODY, "Content-Type: text/plain"))
        else:
            writer.write(_answer(b"# EOF\n" + b"x 1\n", "Content-Type: application/openmetrics-text"))

    async def check(url: str, connections: list[int]) -> None:
        async with httpx.AsyncClient(follow_redirects=True) as fallback:
            source = HttpExpositionSource(url, fallback, ManualClock(5_000))
            assert source.plain is not None
            loop = asyncio.get_running_loop()
            first = await source.collect(loop.time() + 5)
            assert first.health.up and len(first.batch) == 2
            assert source.plain is None  # redirected once: httpx from now on
            bad = await source.collect(loop.time() + 5)  # content after # EOF
            assert (bad.health.up, bad.health.reason) == (False, "parse")
            await source.close()

    _run(handler, check)


def test_source_timeout_closes_the_connection() -> None:
    async def handler(_: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 1:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nm 1\n")  # then nothing
            await asyncio.sleep(0.5)
            return
        writer.write(_answer(BODY))

    async def check(url: str, connections: list[int]) -> None:
        async with httpx.AsyncClient() as fallback:
            source = HttpExpositionSource(url, fallback, ManualClock(5_000))
            loop = asyncio.get_running_loop()
            slow = await source.collect(loop.time() + 0.2)
            assert (slow.health.up, slow.health.reason) == (False, "timeout")
            ok = await source.collect(loop.time() + 2)
            assert ok.health.up and len(ok.batch) == 2
            assert connections[0] == 2
            await source.close()

    _run(handler, check)


def test_redirect_is_reported_not_followed() -> None:
    async def handler(_: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(_answer(b"", "Location: https://elsewhere/metrics", status="301 Moved Permanently"))

    async def check(url: str, connections: list[int]) -> None:
        with pytest.raises(Redirect) as info:
            await _client(url).get()
        assert (info.value.status, info.value.location) == (301, "https://elsewhere/metrics")

    _run(handler, check)
