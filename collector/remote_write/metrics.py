"""The metrics of remote-write queues, shared by the agent (``infermeter_agent_*``) and by ``up``
on a remote engine (``infermeter_remote_write_*``): queue depth, bytes and age, samples sent,
retried and dropped (by reason), send latency."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.remote_write.queue import DiskQueue
from collector.remote_write.sender import SenderStats


def queue_families(prefix: str, queues: Sequence[tuple[str, DiskQueue, SenderStats]], now_ms: int) -> Iterator[Metric]:
    depth = GaugeMetricFamily(f"{prefix}_queue_samples", "Samples waiting in a receiver's queue.", labels=["url"])
    size = GaugeMetricFamily(f"{prefix}_queue_bytes", "Bytes of a receiver's queue on disk.", labels=["url"])
    age = GaugeMetricFamily(f"{prefix}_queue_oldest_age_seconds", "Age of the oldest queued body.", labels=["url"])
    sent = CounterMetricFamily(f"{prefix}_samples_sent", "Samples a receiver acknowledged.", labels=["url"])
    dropped = CounterMetricFamily(
        f"{prefix}_samples_dropped", "Samples dropped: refused by the receiver or pushed out of a full queue.",
        labels=["url", "reason"],
    )
    retries = CounterMetricFamily(f"{prefix}_send_retries", "Sends retried.", labels=["url"])
    latency = GaugeMetricFamily(f"{prefix}_send_seconds", "Latency of the latest send.", labels=["url"])
    for url, queue, stats in queues:
        q = queue.stats
        depth.add_metric([url], q.samples)
        size.add_metric([url], q.bytes)
        oldest = queue.peek(1)
        age.add_metric([url], max(0.0, (now_ms - oldest[0].put_ms) / 1000) if oldest else 0.0)
        sent.add_metric([url], stats.samples_sent)
        dropped.add_metric([url, "refused"], stats.samples_dropped)
        dropped.add_metric([url, "queue_full"], q.dropped_samples)
        dropped.add_metric([url, "corrupt"], q.corrupt_records)
        retries.add_metric([url], stats.retries)
        latency.add_metric([url], stats.send_seconds[-1] if stats.send_seconds else 0.0)
    yield from (depth, size, age, sent, dropped, retries, latency)
