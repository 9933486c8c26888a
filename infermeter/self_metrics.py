"""The service's own metrics, on a registry owned by the runtime (never the global one)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from store.tsdb import TimeSeriesStore


class StoreCollector(Collector):
    """Reads the store's counters at scrape time, so the hot path only bumps integers."""

    def __init__(self, store: TimeSeriesStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        stats = dict(self.store.stats)
        yield CounterMetricFamily(
            "infermeter_store_samples_appended", "Samples committed to the store.", value=stats["appended"]
        )
        yield CounterMetricFamily(
            "infermeter_store_samples_duplicate", "Exact duplicate samples dropped.", value=stats["duplicates"]
        )
        rejected = CounterMetricFamily(
            "infermeter_store_samples_rejected", "Samples rejected, by reason.", labels=["reason"]
        )
        for reason, count in sorted(self.store.rejected_by_reason().items()):
            rejected.add_metric([reason], count)
        yield rejected
        yield CounterMetricFamily(
            "infermeter_store_checkpoints", "Checkpoints that flushed head samples to chunks.", value=stats["checkpoints"]
        )
        yield GaugeMetricFamily("infermeter_store_series", "Series known to the store.", value=len(self.store.index))
        yield GaugeMetricFamily(
            "infermeter_store_head_samples", "Samples held in the in-memory head.", value=self.store.head.samples
        )


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "infermeter_http_requests", "HTTP requests served.", ["route", "code"], registry=registry
        )
        self.ingest_errors = Counter(
            "infermeter_ingest_errors", "Pushed batches refused, by reason.", ["reason"], registry=registry
        )
        self.latency = Histogram(
            "infermeter_http_request_duration_seconds", "HTTP request latency.", ["route"], registry=registry
        )


def build_registry(store: TimeSeriesStore) -> tuple[CollectorRegistry, ApiMetrics]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))
    return registry, ApiMetrics(registry)
