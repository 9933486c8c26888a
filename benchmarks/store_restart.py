"""Section ``restart`` of :mod:`benchmarks.store_bench`: what a stop and the next start cost with
a large head, the two ways a stop can go (``store.checkpoint_on_stop``).

A SQLite store takes ``series`` x ``scrapes`` samples one second apart (all of them still in the
head: no chunk boundary is crossed), then:

* closed the service's way (``checkpoint_on_close=False``: what is due is written, the rest stays
  in the write-ahead rows): the close, then the next open, which replays those rows into the head;
* closed checkpointing the whole head (``checkpoint_on_close=True``): the close.

Each figure is the median of ``repeats`` fresh stores, with its range. No target: Prometheus
leaves its head to WAL replay the same way, and the figures say what a stop and a start cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from sqlalchemy import Engine

from benchmarks._common import recent_hour, section, spread
from store import ManualClock, SampleBatch, SeriesKey, StoreOptions, TimeSeriesStore, create_store_engine


def _filled(path: Path, series: int, scrapes: int, checkpoint_on_close: bool) -> tuple[TimeSeriesStore, Engine]:
    from infermeter import db

    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    start = recent_hour(1)
    clock = ManualClock(start)
    store = TimeSeriesStore(engine, clock, StoreOptions(checkpoint_on_close=checkpoint_on_close))
    store.open()
    keys = [SeriesKey.of("restart_metric", i=str(i)) for i in range(series)]
    ids = store.resolve(keys)
    values = np.random.default_rng(0).integers(0, 100, (scrapes, series)).astype(np.float64)
    for j in range(scrapes):
        clock.set(start + j * 1000)
        store.append(SampleBatch.one_per_key(keys, start + j * 1000, values[j], ids))
    return store, engine


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench_restart(series: int, scrapes: int, repeats: int, tmp: Path) -> None:
    section(f"restart: {series:,} series x {scrapes} scrapes in the head ({series * scrapes / 1e6:.1f} M samples)")
    stop_replay, start_replay, stop_whole = [], [], []
    for attempt in range(repeats):
        path = tmp / f"restart-{attempt}.sqlite"
        store, engine = _filled(path, series, scrapes, checkpoint_on_close=False)
        stop_replay.append(_timed(partial(store.close, flush=True)))
        reopened = TimeSeriesStore(engine, store.clock, StoreOptions())
        start_replay.append(_timed(reopened.open))
        samples = reopened.head.samples
        reopened.close(flush=False)
        engine.dispose()
        if samples != series * scrapes:
            raise SystemExit(f"the reopened head holds {samples:,} samples, {series * scrapes:,} were appended")
        path.unlink()
        store, engine = _filled(path, series, scrapes, checkpoint_on_close=True)
        stop_whole.append(_timed(partial(store.close, flush=True)))
        engine.dispose()
        path.unlink()
    print(f"  stop, what is due written (the service's default)   {spread(stop_replay)} s")
    print(f"  next start, write-ahead rows replayed into the head  {spread(start_replay)} s")
    print(f"  stop, whole head checkpointed (checkpoint_on_stop)   {spread(stop_whole)} s")
