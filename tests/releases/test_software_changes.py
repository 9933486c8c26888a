"""A version change on a node becomes a ``software`` marker once, however often the leader looks
(and whichever process of a pair looks), and the cost-spike check can then name it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine

from infermeter import db
from releases.markers import MarkerStore
from releases.software import SoftwareChangeRecorder
from store import ManualClock, Reader, StoreOptions, TimeSeriesStore
from store.types import STALE_NAN, Sample, SampleBatch, SeriesKey

T0 = 1_800_000_000_000
MIN = 60_000


def test_an_upgrade_is_recorded_once(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 's.db'}")
    db.upgrade(engine)
    clock = ManualClock(T0)
    store = TimeSeriesStore(engine, clock, StoreOptions())
    store.open()
    old = SeriesKey.of("node_software_info", job="nccl", host="n1", component="nccl", version="2.21.5")
    new = SeriesKey.of("node_software_info", job="nccl", host="n1", component="nccl", version="2.23.4")
    other = SeriesKey.of("node_software_info", job="gpu", host="n2", component="driver", version="550.54.15")
    try:
        for minute in range(40):
            at = T0 + minute * MIN
            clock.set(at)
            upgraded = minute >= 25
            store.append(SampleBatch.from_samples([Sample(old, at, STALE_NAN if upgraded else 1.0),
                                                   Sample(new, at, 1.0 if upgraded else STALE_NAN),
                                                   Sample(other, at, 1.0)]))
        markers = MarkerStore(engine, clock)
        record = SoftwareChangeRecorder(Reader(store), markers)
        assert record(T0 + 39 * MIN) == 1
        assert record(T0 + 39 * MIN) == 0  # a second look, or the other process of a pair: nothing twice
        assert SoftwareChangeRecorder(Reader(store), MarkerStore(engine, clock))(T0 + 39 * MIN) == 0
        (marker,) = markers.between(T0, T0 + 40 * MIN, kind="software")
        assert (marker.node, marker.version, marker.message) == ("n1", "2.23.4", "nccl 2.21.5 -> 2.23.4")
        assert abs(marker.at_ms - (T0 + 25 * MIN)) <= MIN and marker.actor == "infermeter"
        assert markers.nearest_before(T0 + 39 * MIN) == marker
    finally:
        store.close(flush=False)
        engine.dispose()
