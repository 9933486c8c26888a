"""One deterministic set of samples, written both to infermeter's store and, as OpenMetrics,
to Prometheus 2.42 blocks: counters (one with a reset, one that first appears mid-way at a
non-zero value), gauges, a histogram, a series that stops (staleness by lookback), label sets
shaped like real exporters'."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from store.types import SeriesKey

STEP_MS = 15_000
HOURS = 2
INSTANCES = ("10.0.0.1:9100", "10.0.0.2:9100", "10.0.0.3:9100")
MODES = ("idle", "user", "system")
BUCKETS = ("0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf")


def series(t0_ms: int) -> Iterator[tuple[SeriesKey, np.ndarray, np.ndarray]]:
    """(key, timestamps ms, values) of every series."""
    rng = np.random.default_rng(42)
    n = HOURS * 3600_000 // STEP_MS + 1
    ts = t0_ms + np.arange(n, dtype=np.int64) * STEP_MS
    minutes = np.arange(n) * STEP_MS / 60_000
    for i, inst in enumerate(INSTANCES):
        job = {"job": "node", "instance": inst}
        for m, mode in enumerate(MODES):
            rate = (1 + i) * (0.5 + m) * (1 + 0.3 * np.sin(minutes / (7 + m)))
            inc = np.round(rate * 15 * (1 + 0.1 * rng.random(n)), 3)
            total = np.round(np.cumsum(inc) + 1000 * (i + 1), 3)
            if i == 1 and mode == "user":  # the exporter restarted: the counter starts again
                cut = n // 2
                total[cut:] = np.round(total[cut:] - total[cut - 1] + inc[cut], 3)
            yield SeriesKey.of("demo_cpu_seconds_total", job, mode=mode), ts, total
        mem = np.round(4e9 + 1e9 * np.sin(minutes / 13 + i) + 1e7 * rng.standard_normal(n))
        yield SeriesKey.of("demo_memory_used_bytes", job), ts, mem
        yield SeriesKey.of("demo_memory_total_bytes", job), ts, np.full(n, 8e9 + i * 1e9)
        temp = np.round(50 + 10 * np.sin(minutes / 9 + i) + rng.standard_normal(n), 2)
        yield SeriesKey.of("demo_temperature_celsius", job, zone="gpu"), ts, temp
        yield SeriesKey.of("demo_temperature_celsius", job, zone="mem"), ts, np.round(temp - 5, 2)
        up = np.where((minutes > 40 + 10 * i) & (minutes < 45 + 10 * i), 0.0, 1.0)
        yield SeriesKey.of("demo_up", job), ts, up
        counts = np.zeros(n)
        cum = np.zeros((len(BUCKETS), n))
        observations = rng.poisson(20 + 5 * i, n)
        for b in range(len(BUCKETS)):
            share = 1.0 if BUCKETS[b] == "+Inf" else min(1.0, float(BUCKETS[b]) * (1.5 - 0.3 * i))
            cum[b] = np.cumsum(np.floor(observations * share))
        counts = cum[-1]
        for b, le in enumerate(BUCKETS):
            yield SeriesKey.of("demo_request_duration_seconds_bucket", job, le=le), ts, cum[b]
        yield SeriesKey.of("demo_request_duration_seconds_count", job), ts, counts
        yield SeriesKey.of("demo_request_duration_seconds_sum", job), ts, np.round(counts * (0.2 + 0.05 * i), 3)
    # a job that stops half-way (its series go stale after the 5 min lookback)
    half = n // 2
    yield SeriesKey.of("demo_batch_last_success_seconds", job="batch", instance="b:1"), ts[:half], np.round(ts[:half] / 1000 - 30)
    # a counter that first appears mid-way at a non-zero value
    late = n // 3
    yield SeriesKey.of("demo_errors_total", job="node", instance=INSTANCES[0]), ts[late:], 7 + np.floor(minutes[late:] / 10)
