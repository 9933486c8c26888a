"""The store against SQLite and PostgreSQL: writes, validation, checkpoints, queries, retention."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sqlalchemy import func, select

from store import (
    STALE_NAN,
    ManualClock,
    Matcher,
    RangeQuery,
    Reader,
    RejectReason,
    Sample,
    SampleBatch,
    Selector,
    SeriesKey,
    StoreOptions,
    schema,
)
from tests.conftest import T0, StoreFactory

MIN = 60_000
HOUR = 3_600_000


def util(gpu: str, host: str = "node-a") -> SeriesKey:
    return SeriesKey.of("gpu_util", gpu=gpu, host=host)


def batch(*samples: tuple[SeriesKey, int, float]) -> SampleBatch:
    return SampleBatch.from_samples(Sample(*s) for s in samples)


def fill(store, keys: list[SeriesKey], start: int, n: int, step: int, value_fn) -> None:  # type: ignore[no-untyped-def]
    """One append per timestamp, all keys at once (scrape-shaped)."""
    for i in range(n):
        ts = start + i * step
        store.clock.set(ts)
        values = np.asarray([value_fn(k, i) for k in range(len(keys))], dtype=np.float64)
        store.append(SampleBatch.one_per_key(keys, ts, values))


def test_round_trip_and_matchers(make_store: StoreFactory) -> None:
    store = make_store()
    store.append(
        batch(
            (util("0"), T0, 10.0),
            (util("1"), T0, 20.0),
            (util("2", host="node-b"), T0, 30.0),
            (SeriesKey.of("power_w", gpu="0"), T0, 300.5),
        )
    )
    reader = Reader(store)

    def gpus(*matchers: Matcher) -> list[str]:
        return sorted(s.key.get("gpu") for s in reader.raw(Selector("gpu_util", matchers), T0, T0))

    assert gpus() == ["0", "1", "2"]
    assert gpus(Matcher("gpu", "=", "1")) == ["1"]
    assert gpus(Matcher("gpu", "!=", "1")) == ["0", "2"]
    assert gpus(Matcher("host", "=~", "node-.")) == ["0", "1", "2"]
    assert gpus(Matcher("host", "=~", "node")) == []  # regexes are anchored
    assert gpus(Matcher("host", "!~", "node-a")) == ["2"]
    assert gpus(Matcher("missing", "=", "")) == ["0", "1", "2"]  # absent label equals ""
    by_name = reader.raw(Selector(None, (Matcher("__name__", "=~", "power.*"),)), T0, T0)
    assert [(s.key.name, float(s.values[0])) for s in by_name] == [("power_w", 300.5)]


def test_duplicates_out_of_order_and_conflicts(make_store: StoreFactory) -> None:
    store = make_store(StoreOptions(out_of_order_window_ms=5 * MIN))
    store.clock.set(T0 + 25 * MIN)  # type: ignore[attr-defined]  # every sample here lies in the past
    key = util("0")
    first = store.append(batch((key, T0, 1.0), (key, T0 + 15_000, 2.0)))
    assert (first.accepted, first.duplicates, first.rejected) == (2, 0, {})

    again = store.append(batch((key, T0 + 15_000, 2.0)))  # exact duplicate of the newest
    assert (again.accepted, again.duplicates) == (0, 1)
    conflict = store.append(batch((key, T0 + 15_000, 3.0)))  # same time, other value
    assert conflict.rejected == {RejectReason.CONFLICT: 1}

    late_ok = store.append(batch((key, T0 + 7_000, 1.5)))  # out of order, inside the window
    assert late_ok.accepted == 1
    late_dup = store.append(batch((key, T0 + 7_000, 1.5)))
    assert late_dup.duplicates == 1
    late_conflict = store.append(batch((key, T0, 9.0)))
    assert late_conflict.rejected == {RejectReason.CONFLICT: 1}

    store.append(batch((key, T0 + 20 * MIN, 5.0)))
    too_old = store.append(batch((key, T0 + 10 * MIN, 4.0)))  # 10 min behind, window is 5
    assert too_old.rejected == {RejectReason.TOO_OLD: 1}

    in_batch = store.append(batch((key, T0 + 21 * MIN, 6.0), (key, T0 + 21 * MIN, 6.0), (key, T0 + 21 * MIN, 7.0)))
    assert (in_batch.accepted, in_batch.duplicates, in_batch.rejected) == (1, 1, {RejectReason.CONFLICT: 1})

    series = Reader(store).raw(Selector("gpu_util"), T0, T0 + HOUR)[0]
    assert series.ts_ms.tolist() == [T0, T0 + 7_000, T0 + 15_000, T0 + 20 * MIN, T0 + 21 * MIN]
    assert series.values.tolist() == [1.0, 1.5, 2.0, 5.0, 6.0]
    assert store.rejected_by_reason() == {"too_old": 1, "duplicate_conflict": 3, "too_far_in_future": 0, "series_limit": 0}


def test_rejected_batch_leaves_nothing_behind(make_store: StoreFactory) -> None:
    store = make_store()
    bad = SampleBatch([util("0")], np.zeros(1, np.int64), np.asarray([T0]), np.asarray([1.0]), np.asarray([999]))
    with pytest.raises(ValueError, match="ids this store did not hand out"):
        store.append(bad)
    assert Reader(store).raw(Selector("gpu_util"), T0 - HOUR, T0 + HOUR) == []


@pytest.mark.parametrize("slice_samples", [250_000, 100], ids=["one-slice", "many-slices"])
def test_samples_survive_reopen_from_write_ahead_and_chunks(
    make_store: StoreFactory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, slice_samples: int
) -> None:
    monkeypatch.setattr("store.checkpoint.SLICE_SAMPLES", slice_samples)
    opts = StoreOptions(chunk_range_ms=2 * HOUR)
    store = make_store(opts)
    keys = [util(str(g)) for g in range(4)]
    fill(store, keys, T0, 4 * 240 + 10, 15_000, lambda k, i: float((k * 7 + i) % 100))
    assert store.stats["checkpoints"] >= 1
    with store.engine.connect() as conn:
        chunk_count = conn.execute(select(func.count()).select_from(schema.chunks)).scalar_one()
        wal_rows = conn.execute(select(func.count()).select_from(schema.wal)).scalar_one()
    assert chunk_count >= 4 and wal_rows >= 1
    store.close(flush=False)  # as if killed: the tail lives only in the write-ahead table

    reopened = make_store(opts)
    series = Reader(reopened).raw(Selector("gpu_util", (Matcher("gpu", "=", "3"),)), T0, T0 + 10 * HOUR)[0]
    assert len(series.ts_ms) == 4 * 240 + 10
    assert series.values.tolist() == [float((21 + i) % 100) for i in range(4 * 240 + 10)]
    assert np.all(np.diff(series.ts_ms) == 15_000)

    reopened.close(flush=True)
    with reopened.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema.wal)).scalar_one() == 0
    third = make_store(opts)
    again = Reader(third).raw(Selector("gpu_util"), T0, T0 + 10 * HOUR)
    assert sum(len(s.ts_ms) for s in again) == 4 * (4 * 240 + 10)


@pytest.mark.parametrize("cache_rows", [0, 2_000_000], ids=["sql", "cached"])
def test_rollups_equal_aggregating_raw_samples(make_store: StoreFactory, cache_rows: int) -> None:
    store = make_store(StoreOptions(chunk_range_ms=HOUR, head_retain_ms=10 * MIN, rollup_cache_rows=cache_rows))
    rng = np.random.default_rng(7)
    keys = [util(str(g)) for g in range(3)] + [SeriesKey.of("tokens_total", gpu=str(g)) for g in range(2)]
    walks = rng.integers(-3, 4, size=(5, 6 * 240)).cumsum(axis=1)
    counters = np.cumsum(rng.integers(0, 50, size=(2, 6 * 240)), axis=1)
    counters[0, 700:] -= counters[0, 700]  # a counter reset half way

    def value(k: int, i: int) -> float:
        return float(walks[k, i] + 50) if k < 3 else float(counters[k - 3, i])

    fill(store, keys, T0, 6 * 240, 15_000, value)
    reader = Reader(store)
    end = T0 + 6 * HOUR - 1
    for fn in ("avg", "min", "max", "sum", "count", "last", "increase", "rate"):
        for metric in ("gpu_util", "tokens_total"):
            for step in (MIN, 5 * MIN, HOUR):
                rolled = reader.range(RangeQuery(Selector(metric), T0 + HOUR, end, step, fn))  # type: ignore[arg-type]
                raw = reader.range(RangeQuery(Selector(metric), T0 + HOUR, end, step - 1 if step == MIN else step + 1, fn))  # type: ignore[arg-type]
                assert rolled[0].source.startswith("rollup"), (fn, step)
                # The raw path at an unaligned step gives other buckets; compare against numpy
                # over the raw samples at the same aligned step instead.
                assert raw[0].source == "raw"
                for result in rolled:
                    samples = reader.raw(Selector(metric, (Matcher("gpu", "=", result.labels["gpu"]),)), T0, end)[0]
                    expected = _aggregate(samples.ts_ms, samples.values, T0 + HOUR, end, step, fn)
                    np.testing.assert_allclose(result.values, expected, rtol=1e-9, equal_nan=True, err_msg=f"{fn} {step}")


def _aggregate(ts: np.ndarray, vals: np.ndarray, start: int, end: int, step: int, fn: str) -> np.ndarray:
    """The definition, written out sample by sample."""
    origin = start // step * step
    out = []
    for t in range(origin, end + 1, step):
        inside = (ts >= t) & (ts < t + step)
        v = vals[inside]
        if fn in ("increase", "rate"):
            idx = np.flatnonzero(inside)
            total = 0.0
            for i in idx:
                if i == 0:
                    continue
                delta = vals[i] - vals[i - 1]
                total += vals[i] if delta < 0 else delta
            out.append(total / (step / 1000) if fn == "rate" else total if len(idx) else math.nan)
            if not len(idx):
                out[-1] = math.nan
            continue
        if not len(v):
            out.append(math.nan)
            continue
        out.append({"avg": v.mean(), "min": v.min(), "max": v.max(), "sum": v.sum(), "count": len(v), "last": v[-1]}[fn])
    return np.asarray(out, dtype=np.float64)


def test_rate_handles_counter_resets_and_group_by(make_store: StoreFactory) -> None:
    store = make_store()
    keys = [SeriesKey.of("req_total", model="a", node="n1"), SeriesKey.of("req_total", model="a", node="n2"),
            SeriesKey.of("req_total", model="b", node="n1")]
    # 10 per 15 s on every series; node n2 restarts at i=20 (counter drops to 5).
    def value(k: int, i: int) -> float:
        if k == 1 and i >= 20:
            return float(5 + 10 * (i - 20))
        return float(10 * i)

    fill(store, keys, T0, 40, 15_000, value)
    reader = Reader(store)
    rates = reader.range(RangeQuery(Selector("req_total"), T0 + MIN, T0 + 8 * MIN, MIN, "rate"))
    for result in rates:
        assert result.values[0] == pytest.approx(40 / 60), result.labels
    n2 = next(r for r in rates if r.labels["node"] == "n2")
    # The minute holding the reset: 3 normal increments (30) + the reset sample counted as 5.
    reset_minute = (T0 + 20 * 15_000) // MIN * MIN
    i = int((reset_minute - n2.ts_ms[0]) // MIN)
    assert n2.values[i] * 60 == pytest.approx(35.0)
    by_model = reader.range(RangeQuery(Selector("req_total"), T0 + MIN, T0 + 2 * MIN, MIN, "rate", ("model",), "sum"))
    assert {r.labels["model"]: round(r.values[0] * 60) for r in by_model} == {"a": 80, "b": 40}
    count = reader.range(RangeQuery(Selector("req_total"), T0 + MIN, T0 + 2 * MIN, MIN, "last", ("node",), "count"))
    assert {r.labels["node"]: r.values[0] for r in count} == {"n1": 2.0, "n2": 1.0}


def test_histogram_quantile_matches_hand_computation(make_store: StoreFactory) -> None:
    store = make_store()
    bounds = ["0.01", "0.05", "0.1", "0.5", "+Inf"]
    keys = [SeriesKey.of("ttft_seconds_bucket", le=le, model="m") for le in bounds]
    # Per 15 s: 2 requests <= 10 ms, 4 more <= 50 ms, 2 more <= 100 ms, 2 more <= 500 ms.
    per_scrape = np.asarray([2, 6, 8, 10, 10], dtype=np.float64)
    fill(store, keys, T0, 9, 15_000, lambda k, i: float(per_scrape[k] * i))
    reader = Reader(store)
    result = reader.histogram_quantile(0.9, Selector("ttft_seconds_bucket"), T0 + MIN, T0 + MIN, MIN, ("model",))
    # Over the minute [T0+60s, T0+120s): 4 increments -> cumulative 8, 24, 32, 40, 40.
    # rank = 0.9 * 40 = 36 falls in (0.1, 0.5] holding 32..40: 0.1 + 0.4 * (36-32)/8 = 0.3
    assert result[0].labels == {"model": "m"}
    assert result[0].values[0] == pytest.approx(0.3)
    median = reader.histogram_quantile(0.5, Selector("ttft_seconds_bucket"), T0 + MIN, T0 + MIN, MIN)
    # rank 20 in (0.01, 0.05] holding 8..24: 0.01 + 0.04 * 12/16 = 0.04
    assert median[0].values[0] == pytest.approx(0.04)


def test_staleness_marker_hides_series_from_instant_queries(make_store: StoreFactory) -> None:
    store = make_store()
    store.append(batch((util("0"), T0, 5.0), (util("1"), T0, 6.0)))
    store.append(batch((util("1"), T0 + 15_000, STALE_NAN)))
    found = Reader(store).instant(Selector("gpu_util"), T0 + 20_000)
    assert [(k.get("gpu"), v) for k, _, v in found] == [("0", 5.0)]
    # the marker is stored bit-exact and survives a checkpoint
    store.checkpoint(force=True)
    raw = Reader(store).raw(Selector("gpu_util", (Matcher("gpu", "=", "1"),)), T0, T0 + MIN)[0]
    assert raw.values[-1:].view(np.uint64)[0] == np.float64(STALE_NAN).view(np.uint64)


def test_idle_series_are_flushed_and_can_resume(make_store: StoreFactory, clock: ManualClock) -> None:
    opts = StoreOptions(idle_flush_ms=30 * MIN, chunk_range_ms=2 * HOUR, checkpoint_grace_ms=0)
    store = make_store(opts)
    key = util("0")
    fill(store, [key], T0 + 10 * MIN, 6, 15_000, lambda k, i: float(i))  # 10:00 .. 11:15
    clock.set(T0 + 50 * MIN)
    store.maintain()
    assert store.head.flushed_until[store.index.get(key)] == T0 + 10 * MIN + 5 * 15_000 + 1
    # resumes at 11:30, inside the minute bucket the idle flush already wrote: rows merge
    fill(store, [key], T0 + 10 * MIN + 6 * 15_000, 10, 15_000, lambda k, i: float(6 + i))
    store.checkpoint(force=True)
    reader = Reader(store)
    minute = reader.range(RangeQuery(Selector("gpu_util"), T0 + 10 * MIN, T0 + 14 * MIN - 1, MIN, "count"))
    assert minute[0].values.tolist() == [4.0, 4.0, 4.0, 4.0]
    inc = reader.range(RangeQuery(Selector("gpu_util"), T0 + 10 * MIN, T0 + 14 * MIN - 1, 2 * MIN, "increase"))
    assert inc[0].source.startswith("rollup")
    assert inc[0].values.tolist() == [7.0, 8.0]


def test_retention_drops_old_chunks_and_rollups(make_store: StoreFactory, clock: ManualClock) -> None:
    day = 24 * HOUR
    opts = StoreOptions(
        raw_retention_ms=2 * day,
        rollup_retention_ms={MIN: 3 * day, HOUR: 10 * day},
        retention_interval_ms=0,
        checkpoint_grace_ms=0,
    )
    store = make_store(opts)
    key = util("0")
    for d in range(5):
        fill(store, [key], T0 + d * day, 4, 15 * MIN, lambda k, i: 1.0)
    store.checkpoint(force=True)
    clock.set(T0 + 5 * day)
    store.maintain()
    with store.engine.connect() as conn:
        chunk_starts = [r[0] for r in conn.execute(select(schema.chunks.c.start_ms))]
        minute_rows = conn.execute(
            select(func.min(schema.rollup_spans.c.first_ms)).where(schema.rollup_spans.c.resolution_ms == MIN)
        ).scalar_one()
        hour_rows = conn.execute(
            select(func.min(schema.rollup_spans.c.first_ms)).where(schema.rollup_spans.c.resolution_ms == HOUR)
        ).scalar_one()
    assert min(chunk_starts) >= T0 + 3 * day - 2 * HOUR
    assert minute_rows >= T0 + 2 * day
    assert hour_rows == T0


def test_read_only_open_sees_unflushed_samples(make_store: StoreFactory) -> None:
    writer = make_store()
    writer.append(batch((util("0"), T0, 1.0), (util("0"), T0 + 15_000, 2.0)))
    reader_store = make_store(read_only=True)
    series = Reader(reader_store).raw(Selector("gpu_util"), T0, T0 + MIN)
    assert series[0].values.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="not open for writing"):
        reader_store.append(batch((util("0"), T0 + 30_000, 3.0)))


def test_store_and_reader_satisfy_the_stage_interfaces(make_store: StoreFactory) -> None:
    from store import Appender, SeriesReader

    store = make_store()
    appender: Appender = store
    reader: SeriesReader = Reader(store)
    ids = appender.resolve([util("0"), util("1")])
    assert ids.tolist() == appender.resolve([util("0"), util("1")]).tolist()
    result = appender.append(SampleBatch.one_per_key([util("0"), util("1")], T0, np.asarray([1.0, 2.0]), ids))
    assert result.accepted == 2
    assert [s.values.tolist() for s in reader.raw(Selector("gpu_util"), T0, T0)] == [[1.0], [2.0]]


def test_checkpoint_runs_as_soon_as_every_live_series_is_due(make_store: StoreFactory) -> None:
    # Default options: a 2 h chunk range, a 5 min out-of-order window and a 60 s grace.
    store = make_store()
    keys = [util(str(g)) for g in range(10)]
    fill(store, keys, T0, 500, 15_000, lambda k, i: float(i))  # up to T0 + 2h + 4m45s
    assert store.stats["checkpoints"] == 0
    fill(store, keys, T0 + 500 * 15_000, 1, 15_000, lambda k, i: 1.0)  # T0 + 2h + 5m: all due
    assert store.stats["checkpoints"] == 1
    assert store.head.flushed_until[store.index.get(keys[0])] == T0 + 2 * HOUR
    assert store.stats["flushed"] == 10 * 480  # each series' samples below T0 + 2h (15 s apart)


def test_rollup_cache_stays_coherent_across_checkpoints_and_merges(make_store: StoreFactory, clock: ManualClock) -> None:
    opts = StoreOptions(chunk_range_ms=HOUR, idle_flush_ms=30 * MIN, checkpoint_grace_ms=0)
    store = make_store(opts)
    keys = [util("0"), util("1")]
    fill(store, keys, T0, 4 * 240, 15_000, lambda k, i: float(i % 17 + k))
    reader = Reader(store)

    def minute_counts(start: int, end: int) -> list[float]:
        result = reader.range(RangeQuery(Selector("gpu_util", (Matcher("gpu", "=", "0"),)), start, end, MIN, "count"))
        return result[0].values.tolist()

    def hourly(fn: str) -> list[float]:
        return reader.range(RangeQuery(Selector("gpu_util"), T0, T0 + 6 * HOUR - 1, HOUR, fn))[0].values.tolist()  # type: ignore[arg-type]

    first = hourly("sum")
    assert store.rollup_cache.rows > 0 and store.rollup_cache.misses > 0
    fill(store, keys, T0 + 4 * HOUR, 2 * 240, 15_000, lambda k, i: float(i % 17 + k))  # two more hours
    store.checkpoint(force=True)
    hits = store.rollup_cache.hits
    second = hourly("sum")
    assert store.rollup_cache.hits > hits  # served from the cache, extended by the checkpoint
    assert second[:3] == first[:3] and not math.isnan(second[5])
    raw = reader.raw(Selector("gpu_util", (Matcher("gpu", "=", "0"),)), T0, T0 + 6 * HOUR)[0]
    expected = _aggregate(raw.ts_ms, raw.values, T0, T0 + 6 * HOUR - 1, HOUR, "sum")
    np.testing.assert_allclose(second, expected)

    # An idle flush cuts a minute bucket in half; reading caches the half row; resuming merges it.
    t = T0 + 6 * HOUR
    fill(store, keys, t, 6, 15_000, lambda k, i: 1.0)  # t .. t + 1m15s
    clock.set(t + 50 * MIN)
    store.maintain()
    assert minute_counts(t, t + 2 * MIN - 1) == [4.0, 2.0]
    fill(store, keys, t + 90_000, 2, 15_000, lambda k, i: 1.0)  # t + 1m30s, t + 1m45s
    store.checkpoint(force=True)
    assert minute_counts(t, t + 2 * MIN - 1) == [4.0, 4.0]
