"""A Prometheus-compatible engine (VictoriaMetrics, Prometheus, Mimir) as the samples store:
reads through its HTTP API, writes by remote write through a durable queue (``store.backend: remote``).

Names load on first use (PEP 562), so ``remote.client.EngineError`` costs no store machinery."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.lazy import lazy_attributes

if TYPE_CHECKING:
    from remote.client import EngineClient, EngineError
    from remote.reader import RemoteReader
    from remote.source import RemoteContext, RemoteSource
    from remote.store import RemoteSampleStore

_WHERE = {"EngineClient": "remote.client", "EngineError": "remote.client", "RemoteReader": "remote.reader",
          "RemoteContext": "remote.source", "RemoteSource": "remote.source", "RemoteSampleStore": "remote.store"}


__getattr__ = lazy_attributes('remote', _WHERE, globals())


__all__ = ["EngineClient", "EngineError", "RemoteContext", "RemoteReader", "RemoteSampleStore", "RemoteSource"]
