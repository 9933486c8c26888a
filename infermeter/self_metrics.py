"""The service's own metrics, on a registry owned by the runtime (never the global one)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collector.scrape_loop import TargetStatus
from infermeter.thread_cpu import ThreadCpuCollector
from store.memory import store_memory
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
        memory = GaugeMetricFamily(
            "infermeter_store_memory_bytes", "Bytes the store holds in memory, by part (Python objects estimated).",
            labels=["part"],
        )
        for part, size in store_memory(self.store).items():
            memory.add_metric([part], size)
        yield memory
        cache = self.store.chunk_cache
        yield GaugeMetricFamily(
            "infermeter_store_chunk_cache_bytes", "Bytes of decoded chunks kept for repeated reads.", value=cache.nbytes
        )
        lookups = CounterMetricFamily(
            "infermeter_store_chunk_cache_lookups", "Chunk reads answered from the decoded-chunk cache or not.",
            labels=["result"],
        )
        lookups.add_metric(["hit"], cache.hits)
        lookups.add_metric(["miss"], cache.misses)
        yield lookups


class ScrapeCollector(Collector):
    """Per-target scrape health, read from the scrape loops' status at scrape time."""

    def __init__(self, statuses: Callable[[], list[TargetStatus]]) -> None:
        self.statuses = statuses

    def collect(self) -> Iterator[Metric]:
        labels = ["job", "instance"]
        scrapes = CounterMetricFamily("infermeter_scrapes", "Scrapes attempted, per target.", labels=labels)
        failures = CounterMetricFamily(
            "infermeter_scrape_failures", "Failed scrapes, per target and reason.", labels=[*labels, "reason"]
        )
        up = GaugeMetricFamily("infermeter_target_up", "1 if the last scrape of the target succeeded.", labels=labels)
        duration = GaugeMetricFamily(
            "infermeter_target_scrape_duration_seconds", "Duration of the last scrape.", labels=labels
        )
        lag = GaugeMetricFamily(
            "infermeter_scrape_loop_lag_seconds", "How late the last scrape started against its schedule.", labels=labels
        )
        for status in self.statuses():
            ident = [status.spec.job, status.spec.instance]
            scrapes.add_metric(ident, status.scrapes)
            for reason, count in sorted(status.failures_by_reason.items()):
                failures.add_metric([*ident, reason], count)
            up.add_metric(ident, 1.0 if status.health.up else 0.0)
            duration.add_metric(ident, status.last_duration_s)
            lag.add_metric(ident, status.lag_s)
        yield from (scrapes, failures, up, duration, lag)


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


def build_registry(
    store: Collector, statuses: Callable[[], list[TargetStatus]]
) -> tuple[CollectorRegistry, ApiMetrics]:
    """``store``: the samples store's own metrics (:class:`StoreCollector` for the embedded one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(store)
    registry.register(ScrapeCollector(statuses))
    registry.register(ThreadCpuCollector())
    return registry, ApiMetrics(registry)
