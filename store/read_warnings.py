"""Warnings a read wants its caller to see: data it could not read (a cold-tier file gone or
corrupt), answered without it instead of failing the whole query.

The API collects them around one query (:func:`collecting`, in the thread that evaluates it)
and returns them as Prometheus's ``warnings``; every other reader gets them in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

log = logging.getLogger(__name__)

_current: ContextVar[list[str] | None] = ContextVar("store_read_warnings", default=None)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """Warnings raised by reads inside the block, in order, each once."""
    found: list[str] = []
    token = _current.set(found)
    try:
        yield found
    finally:
        _current.reset(token)


def warn(text: str) -> None:
    found = _current.get()
    if found is None:
        log.warning("%s", text)
    elif text not in found:
        found.append(text)
        log.warning("%s", text)
