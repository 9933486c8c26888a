"""What every settings section shares: durations as Prometheus writes them (``15s``, ``500ms``),
held as integer milliseconds; strict, frozen models; http(s) URL checks."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from store.durations import DurationMs as DurationMs


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http(s) URL with a host")
    return url
