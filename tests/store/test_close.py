"""Closing the store: everything acknowledged survives, whether the close writes the whole head
to chunks (``checkpoint_on_close``, the library's default) or only what is due (the service's
default: a whole head took longer to encode than a service manager waits for a stop)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import func, select

from infermeter.settings import Settings
from store import Reader, SampleBatch, Selector, SeriesKey, StoreOptions, schema
from tests.conftest import T0, StoreFactory

MIN = 60_000
HOUR = 60 * MIN


def _fill(store: object, keys: list[SeriesKey], start: int, n: int) -> None:
    for i in range(n):
        ts = start + i * 15_000
        store.clock.set(ts)  # type: ignore[attr-defined]
        store.append(SampleBatch.one_per_key(keys, ts, np.full(len(keys), float(i))))  # type: ignore[attr-defined]


def _counts(store: object) -> tuple[int, int]:
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        chunked = conn.execute(select(func.coalesce(func.sum(schema.chunks.c.n), 0))).scalar_one()
        wal = conn.execute(select(func.coalesce(func.sum(schema.wal.c.n), 0))).scalar_one()
    return int(chunked), int(wal)


def test_a_close_that_writes_only_what_is_due_loses_nothing(make_store: StoreFactory) -> None:
    opts = StoreOptions(chunk_range_ms=2 * HOUR, checkpoint_grace_ms=0, background_checkpoints=False,
                        checkpoint_on_close=False)
    store = make_store(opts)
    keys = [SeriesKey.of("gpu_util", gpu=str(g)) for g in range(4)]
    _fill(store, keys, T0 + HOUR + 30 * MIN, 4 * 60)  # 01:30 .. 02:29:45: the first half hour is due at 02:00
    store.close(flush=True)
    chunked, wal = _counts(store)
    assert chunked == 4 * 120  # 01:30 .. 01:59:45, past the out-of-order window
    assert wal >= 4 * 120  # the rest stays in write-ahead rows (a row may hold both halves)
    reopened = make_store(opts)
    got = Reader(reopened).raw(Selector("gpu_util"), 0, 2**62)
    assert sorted(len(s.ts_ms) for s in got) == [240] * 4
    assert all(s.values.tolist() == [float(i) for i in range(240)] for s in got)


def test_a_close_that_checkpoints_the_whole_head_leaves_no_write_ahead_rows(make_store: StoreFactory) -> None:
    store = make_store(StoreOptions(background_checkpoints=False))  # checkpoint_on_close by default
    keys = [SeriesKey.of("gpu_util", gpu=str(g)) for g in range(4)]
    _fill(store, keys, T0 + HOUR + 30 * MIN, 4 * 60)
    store.close(flush=True)
    assert _counts(store) == (4 * 240, 0)


def test_the_service_stops_without_checkpointing_the_whole_head_unless_asked() -> None:
    assert Settings().store.options().checkpoint_on_close is False
    assert Settings.model_validate({"store": {"checkpoint_on_stop": True}}).store.options().checkpoint_on_close
