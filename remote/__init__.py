"""A Prometheus-compatible engine (VictoriaMetrics, Prometheus, Mimir) as the samples store:
reads through its HTTP API, writes by remote write through a durable queue (``store.backend: remote``)."""

from remote.client import EngineClient, EngineError
from remote.reader import RemoteReader
from remote.source import RemoteContext, RemoteSource
from remote.store import RemoteSampleStore

__all__ = ["EngineClient", "EngineError", "RemoteContext", "RemoteReader", "RemoteSampleStore", "RemoteSource"]
