"""What the sections of :mod:`benchmarks.store_bench` share: the run sizes and opening/closing a
:class:`store.TimeSeriesStore` on a manual clock."""

from __future__ import annotations

from dataclasses import dataclass

from infermeter import db
from store import ManualClock, StoreOptions, TimeSeriesStore, create_store_engine


@dataclass(frozen=True)
class Sizes:
    ingest_series: int
    ingest_points: int
    dash_series: int
    dash_days: int
    rss_series: int
    rss_bodies: int
    repeats: int  # query timings: median of this many (at least --repeats)
    ingest_runs: int  # ingest ours vs raw: median of this many alternating pairs (--repeats)


FULL = Sizes(
    ingest_series=1000,
    ingest_points=2000,
    dash_series=64,
    dash_days=7,
    rss_series=5000,
    rss_bodies=1000,
    repeats=5,
    ingest_runs=3,
)
QUICK = Sizes(
    ingest_series=300,
    ingest_points=1000,
    dash_series=16,
    dash_days=2,
    rss_series=5000,
    rss_bodies=100,
    repeats=3,
    ingest_runs=3,
)


# -- the store ----------------------------------------------------------------------------------
def open_store(url: str, start_ms: int) -> tuple[TimeSeriesStore, ManualClock]:
    engine = create_store_engine(url)
    db.upgrade(engine)
    clock = ManualClock(start_ms)
    store = TimeSeriesStore(engine, clock, StoreOptions(background_checkpoints=True))  # the service's default
    store.open()
    return store, clock


def close_store(store: TimeSeriesStore) -> None:
    store.close()
    store.engine.dispose()
