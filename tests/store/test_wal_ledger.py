"""Write-ahead rows stay whole until every sample in them is flushed; nothing is written twice
and nothing is lost across a restart, on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import text

from store import ManualClock, Reader, SampleBatch, Selector, SeriesKey, StoreOptions, TimeSeriesStore
from store.wal_ledger import WalLedger
from tests.conftest import T0, StoreFactory

HOUR = 3_600_000
STEP = 15_000


def _ledger(rows: list[tuple[int, int]]) -> WalLedger:
    ledger = WalLedger()
    for row_id, newest in rows:
        ledger.add(row_id, newest)
    return ledger


def test_flushed_rows_come_as_runs_of_consecutive_ledger_rows() -> None:
    # Ids 4 and 9 were deleted earlier (not in the ledger): a run spans them, since no row has them.
    ledger = _ledger([(1, 10), (2, 20), (3, 30), (5, 99), (6, 40), (7, 50), (8, 60), (10, 70), (11, 5)])
    assert ledger.flushed(upto=10, low=65) == [(1, 3), (6, 8)]  # 5 holds a sample at 99; 10 at 70
    assert ledger.flushed(upto=7, low=1000) == [(1, 7)]  # rows after the plan's newest are not its own
    assert ledger.flushed(upto=11, low=0) == []


def test_forget_drops_exactly_the_deleted_runs_and_keeps_later_rows() -> None:
    ledger = _ledger([(i, i * 10) for i in range(1, 2001)])  # grows past its first allocation
    runs = ledger.flushed(upto=1500, low=500)
    assert runs == [(1, 49)]
    ledger.add(2001, 5)  # appended while the checkpoint was written
    ledger.forget(runs)
    assert len(ledger) == 2001 - 49
    assert ledger.flushed(upto=10**9, low=10**9)[0] == (50, 2001)


def test_forget_drops_many_runs_in_one_pass_and_keeps_the_rows_between() -> None:
    rows = [(i, 100 if i % 3 == 0 else 0) for i in range(1, 3001)]  # every third row holds a sample at 100
    ledger = _ledger(rows)
    runs = ledger.flushed(upto=3000, low=50)
    assert len(runs) == 1000 and runs[:2] == [(1, 2), (4, 5)]
    ledger.forget(runs)
    assert len(ledger) == 1000
    assert ledger.flushed(upto=3000, low=101) == [(3, 3000)]  # only the kept rows are left


def _wal_ids(store: TimeSeriesStore) -> list[int]:
    with store.engine.connect() as conn:
        return [int(r[0]) for r in conn.execute(text("SELECT id FROM wal ORDER BY id"))]


def _scrape(store: TimeSeriesStore, keys: list[SeriesKey], ts: int) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    clock.set(ts)
    store.append(SampleBatch.one_per_key(keys, ts, np.asarray([float(ts // STEP % 97 + k) for k in range(len(keys))])))


def _expect(series: dict[str, list[int]]) -> dict[str, list[float]]:
    return {gpu: [float(t // STEP % 97 + int(gpu)) for t in times] for gpu, times in series.items()}


def _read(store: TimeSeriesStore) -> dict[str, list[float]]:
    out = Reader(store).raw(Selector("gpu_util"), T0 - HOUR, T0 + 10 * HOUR)
    got = {s.key.get("gpu"): s.values.tolist() for s in out}
    for s in out:
        assert np.all(np.diff(s.ts_ms) > 0), "a sample was read twice"
    return got


def test_a_boundary_checkpoint_writes_no_carry_and_deletes_only_flushed_rows(make_store: StoreFactory) -> None:
    opts = StoreOptions(chunk_range_ms=2 * HOUR)
    store = make_store(opts)
    keys = [SeriesKey.of("gpu_util", gpu=str(g)) for g in range(3)]
    start = T0 - T0 % (2 * HOUR)
    times = [start + i * STEP for i in range(int(2.2 * HOUR) // STEP)]  # past the boundary and its 5 min window
    for ts in times:  # the checkpoint runs inside one of these appends
        before = _wal_ids(store)
        _scrape(store, keys, ts)
        after = _wal_ids(store)
        assert set(after) - set(before) == {max(after)}  # only the append's own row is new: no carry row
    boundary = start + 2 * HOUR
    assert store.stats["checkpoints"] == 1
    past = [t for t in times if t >= boundary]
    assert len(_wal_ids(store)) == len(past)  # one row per scrape: exactly those holding samples past the boundary
    store.close(flush=False)  # killed: what is past the boundary lives only in those rows

    reopened = make_store(opts)
    assert _read(reopened) == _expect({g: times for g in ("0", "1", "2")})


def test_a_silent_series_keeps_rows_whose_other_samples_were_flushed_and_replay_reads_them_once(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    opts = StoreOptions(chunk_range_ms=2 * HOUR, idle_flush_ms=24 * HOUR)
    store = make_store(opts)
    busy, quiet = SeriesKey.of("gpu_util", gpu="0"), SeriesKey.of("gpu_util", gpu="1")
    start = T0 - T0 % (2 * HOUR)
    quiet_times = [start + i * STEP for i in range(int(2.1 * HOUR) // STEP)]  # stops just past the first boundary
    busy_times = [start + i * STEP for i in range(int(4.2 * HOUR) // STEP)]  # goes on past the second
    for ts in busy_times:
        _scrape(store, [busy, quiet] if ts in set(quiet_times) else [busy], ts)
    assert store.stats["checkpoints"] >= 2
    kept = _wal_ids(store)
    # The quiet series' samples past the first boundary are unflushed, so every row since then
    # stays, although the busy series' samples in them up to the second boundary are in chunks.
    assert len(kept) == sum(1 for t in busy_times if t >= start + 2 * HOUR)
    store.close(flush=False)

    reopened = make_store(opts)
    expected = _expect({"0": busy_times, "1": quiet_times})
    assert _read(reopened) == expected
    reopened.checkpoint(force=True)  # the replayed samples of chunks already written are not written again
    assert _wal_ids(reopened) == []
    assert _read(reopened) == expected
    reopened.close(flush=False)
    assert _read(make_store(opts)) == expected


def test_runs_of_flushed_rows_are_deleted_a_few_per_statement(
    make_store: StoreFactory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of two series alternate: the first's hold samples flushed by the checkpoint, the
    second's samples past the boundary: one run per flushed row, three runs a statement."""
    monkeypatch.setattr("store.checkpoint._RANGES_PER_DELETE", 3)
    opts = StoreOptions(chunk_range_ms=2 * HOUR, idle_flush_ms=24 * HOUR)  # no series counts as idle
    store = make_store(opts)
    a, b = SeriesKey.of("gpu_util", gpu="0"), SeriesKey.of("gpu_util", gpu="1")
    start = T0 - T0 % (2 * HOUR)
    clock.set(start + 2 * HOUR + 10 * 60_000)
    for i in range(20):
        store.append(SampleBatch.one_per_key([a], start + i * STEP, np.asarray([float(i)])))
        store.append(SampleBatch.one_per_key([b], start + 2 * HOUR + i * STEP, np.asarray([float(i)])))
    ids = _wal_ids(store)
    # a's newest sample, past the boundary's window: a's older samples are due now
    store.append(SampleBatch.one_per_key([a], start + 2 * HOUR + 10 * 60_000, np.asarray([99.0])))
    store.checkpoint()
    assert _wal_ids(store) == ids[1::2] + [max(_wal_ids(store))]  # twenty runs, in seven statements
    assert len(store.wal_ledger) == 21
    store.close(flush=False)
    got = Reader(make_store(opts)).raw(Selector("gpu_util"), start, start + 3 * HOUR)
    assert [s.values.tolist() for s in got] == [[float(i) for i in range(20)] + [99.0], [float(i) for i in range(20)]]
