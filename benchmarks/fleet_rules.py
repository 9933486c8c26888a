"""Part 3 of :mod:`benchmarks.fleet_bench`: our rules engine evaluating the default pack on a
remote engine, as ``up`` does with ``store.backend: remote`` -- each rule one PromQL instant
query to the engine, recording results written back through the durable remote-write queue.
The cost rules' enrichment (three more queries when one fires) is left out, as vmalert has none."""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from alerts.defaults import default_rule_groups
from alerts.engine import RuleEngine
from alerts.thresholds import Thresholds
from infermeter.alerting import RecordSink
from remote import EngineClient, RemoteReader, RemoteSampleStore, RemoteSource
from store.clock import SystemClock


def our_pack_seconds(engine_url: str, tmp: Path, windows: int, window_s: float, interval_ms: int) -> list[float]:
    """Per window: the mean time to evaluate every group of the pack once (groups one after the other)."""
    clock = SystemClock()
    client = EngineClient(engine_url)
    reader = RemoteReader(client, clock)
    writer = RemoteSampleStore(f"{engine_url}/api/v1/write", tmp / "rules-queue", clock)
    writer.open()
    groups = default_rule_groups(Thresholds())
    rules = RuleEngine(groups, RemoteSource(client, reader), clock, CollectorRegistry(), record=RecordSink(writer))
    try:
        rules.evaluate_all()  # a first pass: connections opened, states created
        out = []
        for _ in range(windows):
            spent: list[float] = []
            end = time.monotonic() + window_s
            while time.monotonic() < end:
                began = time.monotonic()
                at = clock.now_ms()
                for group in groups:
                    rules.evaluate_group(group, at)
                spent.append(time.monotonic() - began)
                time.sleep(max(0.0, interval_ms / 1000 - (time.monotonic() - began)))
            out.append(sum(spent) / len(spent))
        failing = {k: h.last_error for k, h in rules.health.items() if h.health != "ok"}
        if failing:
            print(f"  rules failing on the engine: {failing}")
        return out
    finally:
        writer.close()
        client.close()
