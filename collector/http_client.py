"""A minimal HTTP/1.1 client for scraping: ``GET`` over one kept-alive connection per target.

Why not httpx for every scrape: a scrape is one plain GET to a fixed URL, repeated forever.
httpx's general machinery (request/response models, an anyio stream per connection, a pool that
probes every idle connection on every request) cost ~0.6 ms of CPU per request alone and grew
with the number of targets -- more than parsing the body. This client writes a request prepared
once and reads the answer with asyncio streams: tens of microseconds.

What it does: ``http://`` URLs only (the caller falls back to httpx for anything else, for
redirects and for proxies from the environment); ``Content-Length``, chunked and
read-until-close bodies; ``gzip``/``x-gzip``/``deflate`` content encodings (only gzip is
asked for); interim 1xx answers skipped; ``Connection: close`` and HTTP/1.0 honoured; a reused
connection that turns out closed by the server before answering is retried once on a new one.
The body limit counts decompressed bytes and is enforced while reading. Deadlines belong to
the caller (``asyncio.timeout``): a cancelled request closes its connection, since its state
is unknown.

Errors: :class:`FetchError` with a stable ``reason`` (``connect``, ``http_status``, ``http``,
``too_large``) and a message; :class:`Redirect` when the answer is a 3xx with a Location (the
caller decides how to follow it).
"""

from __future__ import annotations

import asyncio
import base64
import zlib
from urllib.parse import unquote, urlsplit

_HEADER_LIMIT = 64 * 1024  # status line plus headers
_MAX_HEADERS = 100
_READ = 256 * 1024


class FetchError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Redirect(Exception):
    """Not an error: a 3xx answer with a Location, for the caller to follow."""

    def __init__(self, status: int, location: str) -> None:
        super().__init__(f"HTTP {status} to {location}")
        self.status = status
        self.location = location


class _Closed(Exception):
    """The connection ended before a status line: retryable once on a reused connection."""


def supports(url: str) -> bool:
    """Whether this client can fetch ``url`` (plain http with a host)."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return False
    return parts.scheme == "http" and bool(parts.hostname)


class _Decoder:
    """Content decoding with a limit on the decoded size."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.deflate_first = False
        self.z: zlib._Decompress | None = None
        if encoding in ("gzip", "x-gzip"):
            self.z = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self.z = zlib.decompressobj()
            self.deflate_first = True
        elif encoding not in ("", "identity"):
            raise FetchError("http", f"unsupported Content-Encoding {encoding!r}")

    def feed(self, data: bytes) -> bytes:
        if self.z is None:
            self.size += len(data)
            if self.size > self.limit:
                raise _TooLarge()
            return data
        room = self.limit - self.size + 1
        try:
            out = self.z.decompress(data, room)
        except zlib.error as exc:
            if self.deflate_first:  # deflate without the zlib header, as some servers send it
                self.deflate_first = False
                self.z = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.feed(data)
            raise FetchError("http", f"cannot decode the body: {exc}") from None
        self.deflate_first = False
        self.size += len(out)
        if self.size > self.limit or self.z.unconsumed_tail:
            raise _TooLarge()
        return out

    def finish(self) -> bytes:
        if self.z is None:
            return b""
        try:
            out = self.z.flush()
        except zlib.error as exc:
            raise FetchError("http", f"cannot decode the body: {exc}") from None
        self.size += len(out)
        if self.size > self.limit:
            raise _TooLarge()
        return out


class _TooLarge(Exception):
    pass


class PlainHttpClient:
    """GETs one ``http://`` URL again and again over a kept-alive connection. Not for
    concurrent use: a scrape loop awaits each fetch before the next (a second caller while one
    is in flight gets a connection of its own for that request)."""

    def __init__(self, url: str, *, body_limit: int, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not a plain http URL: {url!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or 80
        self.body_limit = body_limit
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        netloc = parts.netloc.rpartition("@")[2]
        lines = [f"GET {target} HTTP/1.1", f"Host: {netloc}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if parts.username is not None:  # as httpx does for credentials in the URL
            token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            lines.append(f"Authorization: Basic {base64.b64encode(token).decode()}")
        self._request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._busy = False

    async def get(self) -> tuple[bytes, str]:
        """(decoded body, Content-Type) of a 2xx answer; raises FetchError or Redirect."""
        if self._busy:  # never share a connection between two requests in flight
            conn = await self._connect()
            try:
                return await self._exchange(conn)
            finally:
                conn[1].close()
        self._busy = True
        try:
            idle, self._conn = self._conn, None
            if idle is not None and (idle[0].at_eof() or idle[1].is_closing() or len(getattr(idle[0], "_buffer", b""))):
                idle[1].close()  # closed by the server while idle, or it sent something unasked
                idle = None
            if idle is not None:
                try:
                    body, content_type, keep = await self._exchange_keep(idle)
                    conn = idle
                except _Closed:  # the server closed the idle connection as we reused it
                    idle[1].close()
                    idle = None
            if idle is None:
                conn = await self._connect()
                try:
                    body, content_type, keep = await self._exchange_keep(conn)
                except _Closed:
                    conn[1].close()
                    raise FetchError("http", "server closed the connection without answering") from None
            if keep:
                self._conn = conn
            else:
                conn[1].close()
            return body, content_type
        finally:
            self._busy = False

    async def _exchange(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> tuple[bytes, str]:
        try:
            body, content_type, _ = await self._exchange_keep(conn)
        except _Closed:
            raise FetchError("http", "server closed the connection without answering") from None
        return body, content_type

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.open_connection(self.host, self.port, limit=_HEADER_LIMIT)
        except OSError as exc:
            raise FetchError("connect", str(exc) or type(exc).__name__) from None

    async def _exchange_keep(
        self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]
    ) -> tuple[bytes, str, bool]:
        reader, writer = conn
        ok = False
        try:
            writer.write(self._request)
            status, version, headers = await self._head(reader)
            result = await self._body(reader, status, version, headers)
            ok = True
            return result
        except (ConnectionError, BrokenPipeError) as exc:
            raise FetchError("http", f"{type(exc).__name__}: {exc}") from None
        except asyncio.LimitOverrunError:
            raise FetchError("http", "response header too large") from None
        except asyncio.IncompleteReadError:
            raise FetchError("http", "connection closed in the middle of the response") from None
        finally:
            if not ok:  # whatever is left on the wire is unknown: never reuse it
                writer.close()

    async def _head(self, reader: asyncio.StreamReader) -> tuple[int, str, dict[str, str]]:
        first = True
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if first and not exc.partial:
                    raise _Closed() from None
                raise
            except ConnectionResetError:
                if first:
                    raise _Closed() from None
                raise
            first = False
            parts = line.decode("latin-1").rstrip("\r\n").split(None, 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
                raise FetchError("http", f"malformed status line {line[:80]!r}")
            status = int(parts[1])
            headers: dict[str, str] = {}
            for _ in range(_MAX_HEADERS + 1):
                raw = await reader.readuntil(b"\n")
                if raw in (b"\r\n", b"\n"):
                    break
                name, colon, value = raw.decode("latin-1").partition(":")
                if not colon or not name or name != name.strip():
                    raise FetchError("http", f"malformed header line {raw[:80]!r}")
                name = name.lower()
                value = value.strip()
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
            else:
                raise FetchError("http", "too many response headers")
            if 100 <= status < 200 and status != 101:
                continue  # interim answer (100 Continue, 103 Early Hints): the real one follows
            return status, parts[0], headers

    async def _body(
        self, reader: asyncio.StreamReader, status: int, version: str, headers: dict[str, str]
    ) -> tuple[bytes, str, bool]:
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        if 300 <= status < 400 and "location" in headers:
            raise Redirect(status, headers["location"])  # the connection is dropped: simplest
        if not 200 <= status < 300:
            raise FetchError("http_status", f"HTTP {status}")
        content_type = headers.get("content-type", "")
        if status in (204, 205) or status == 304:
            return b"", content_type, keep
        decoder = _Decoder(headers.get("content-encoding", "").strip().lower(), self.body_limit)
        chunks: list[bytes] = []
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                await self._chunked(reader, decoder, chunks)
            elif "content-length" in headers:
                try:
                    length = int(headers["content-length"].split(",")[0])
                except ValueError:
                    raise FetchError("http", "malformed Content-Length") from None
                if decoder.z is None and length > self.body_limit:
                    raise _TooLarge()
                while length > 0:
                    data = await reader.read(min(length, _READ))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", length)
                    length -= len(data)
                    chunks.append(decoder.feed(data))
            else:  # no framing: the body runs until the server closes
                keep = False
                while data := await reader.read(_READ):
                    chunks.append(decoder.feed(data))
            chunks.append(decoder.finish())
        except _TooLarge:
            raise FetchError("too_large", f"body larger than {self.body_limit} bytes") from None
        return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), content_type, keep

    @staticmethod
    async def _chunked(reader: asyncio.StreamReader, decoder: _Decoder, chunks: list[bytes]) -> None:
        while True:
            line = await reader.readuntil(b"\n")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise FetchError("http", f"malformed chunk size {line[:40]!r}") from None
            if size == 0:
                while (await reader.readuntil(b"\n")) not in (b"\r\n", b"\n"):
                    pass  # trailers
                return
            while size > 0:
                data = await reader.read(min(size, _READ))
                if not data:
                    raise asyncio.IncompleteReadError(b"", size)
                size -= len(data)
                chunks.append(decoder.feed(data))
            if (await reader.readuntil(b"\n")) not in (b"\r\n", b"\n"):
                raise FetchError("http", "malformed chunk end")

    def close(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None
