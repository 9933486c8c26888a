"""Credentials and TLS of a scrape, like Prometheus's ``basic_auth``, ``authorization`` and
``tls_config``: an ``Authorization`` header and an SSL context for one target.

Secrets stay out of everything that is shown: the target's URL and ``instance`` label carry no
userinfo (credentials written into a URL are moved here), ``repr`` hides them, and files
(``password_file``, ``credentials_file``) are re-read when they change, so a rotated secret is
used from the next scrape on without a reload.
"""

from __future__ import annotations

import base64
import os
import ssl
import threading
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit


class CredentialError(Exception):
    """A credentials file cannot be read: the scrape fails with reason ``auth``, naming the file."""


class _File:
    """A small secret file, re-read when its modification time or size changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._value = ""
        self._lock = threading.Lock()

    def read(self) -> str:
        try:
            stat = os.stat(self.path)
            with self._lock:
                if self._seen != (stat.st_mtime_ns, stat.st_size):
                    with open(self.path, encoding="utf-8") as handle:
                        self._value = handle.read().strip()
                    self._seen = (stat.st_mtime_ns, stat.st_size)
                return self._value
        except OSError as exc:
            raise CredentialError(f"cannot read {self.path}: {exc.strerror}") from None


@dataclass(frozen=True)
class ScrapeAuth:
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_file: str | None = None
    auth_type: str = "Bearer"
    credentials: str | None = field(default=None, repr=False)
    credentials_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False
    _files: dict[str, _File] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def _file(self, path: str) -> str:
        if path not in self._files:
            self._files[path] = _File(path)
        return self._files[path].read()

    def header(self) -> str | None:
        """The Authorization header value now (files re-read when changed); raises CredentialError."""
        if self.username is not None:
            password = self._file(self.password_file) if self.password_file else (self.password or "")
            return "Basic " + base64.b64encode(f"{self.username}:{password}".encode()).decode()
        if self.credentials is not None or self.credentials_file:
            secret = self._file(self.credentials_file) if self.credentials_file else (self.credentials or "")
            return f"{self.auth_type} {secret}"
        return None

    @property
    def has_tls(self) -> bool:
        return bool(self.ca_file or self.cert_file or self.server_name or self.insecure_skip_verify)

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """``url`` without ``user:password@``, and the user and password it held (decoded)."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None, None
    host = parts.netloc.rsplit("@", 1)[1]
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, unquote(parts.username), unquote(parts.password or "")


__all__ = ["ScrapeAuth", "CredentialError", "split_userinfo"]
