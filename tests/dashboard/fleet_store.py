"""A real SQLite store holding a synthetic fleet, for the pages' read tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infermeter import db
from store import ManualClock, StoreOptions, TimeSeriesStore, create_store_engine
from store.types import SampleBatch
from tests.dashboard.synthetic import SyntheticFleet


@contextmanager
def fleet_store(path: Path, fleet: SyntheticFleet) -> Iterator[tuple[TimeSeriesStore, ManualClock]]:
    """The fleet written into a new store at ``path`` (the clock at the last batch); closed after."""
    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    clock = ManualClock(fleet.start_ms)
    store = TimeSeriesStore(engine, clock, StoreOptions())
    store.open()
    ids = store.resolve(fleet.keys)
    try:
        for batch in fleet.batches():
            clock.set(int(batch.ts_ms[-1]))
            store.append(SampleBatch(batch.keys, batch.key_index, batch.ts_ms, batch.values, ids))
        yield store, clock
    finally:
        store.close(flush=False)
        engine.dispose()
