"""Rollups stored as spans of buckets: the packing round trip, taking a span's last bucket out,
and what the store writes (one row per series, resolution and chunk range; every bucket once,
also after a flush that cut a bucket in two)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from store import RangeQuery, Reader, SampleBatch, Selector, SeriesKey, StoreOptions, schema
from store.rollup import Frame, regroup
from store.rollup_spans import frame_of_spans, span_rows, split_last
from tests.conftest import T0, StoreFactory

MIN = 60_000
HOUR = 60 * MIN
WINDOW = 2 * HOUR


def _frame(sids: list[int], buckets: list[int], seed: int) -> Frame:
    rng = np.random.default_rng(seed)
    order = np.lexsort((buckets, sids))
    sid, bucket = np.asarray(sids, np.int64)[order], np.asarray(buckets, np.int64)[order]
    n = len(sid)
    floats = [rng.normal(size=n) for _ in range(6)]
    floats[0][:1] = np.nan if n > 3 else floats[0][:1]  # NaN and signed zero stay bit for bit
    floats[1][1:2] = -0.0
    return Frame(sid, bucket, rng.integers(1, 2**31 - 1, n), *floats)


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    pairs = draw(st.sets(st.tuples(st.integers(1, 6), st.integers(-3 * 24 * 60, 3 * 24 * 60)), max_size=300))
    return _frame([s for s, _ in pairs], [T0 + b * MIN for _, b in pairs], draw(st.integers(0, 2**16)))


def _same(a: Frame, b: Frame) -> None:
    for name in ("sid", "bucket", "count", "sum", "min", "max", "first", "last", "inc"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name


def _read(rows: list[tuple[int, int, int, int, int, bytes]], resolution: int) -> Frame:
    return frame_of_spans([(r[1], r[2], r[4], r[5]) for r in rows], resolution)


@settings(max_examples=60, deadline=None)
@given(frames())
def test_spans_give_back_every_bucket_bit_for_bit(frame: Frame) -> None:
    rows = span_rows(MIN, frame, WINDOW)
    _same(_read(rows, MIN), frame)
    assert sum(r[4] for r in rows) == len(frame)
    for _, sid, first, last, n, _ in rows:
        assert first // WINDOW == last // WINDOW  # a span never crosses a chunk range
        inside = frame.bucket[(frame.sid == sid) & (frame.bucket >= first) & (frame.bucket <= last)]
        assert len(inside) == n and inside[0] == first and inside[-1] == last
    keys = [(r[1], r[2]) for r in rows]
    assert len(set(keys)) == len(keys)


@settings(max_examples=60, deadline=None)
@given(frames())
def test_taking_the_last_bucket_out_keeps_the_rest(frame: Frame) -> None:
    rows = span_rows(MIN, frame, WINDOW)
    last, kept = split_last([(r[1], r[2], r[4], r[5]) for r in rows], MIN)
    ends = [r[3] for r in rows]
    assert last.bucket.tolist() == ends and last.sid.tolist() == [r[1] for r in rows]
    assert len(kept) == sum(1 for r in rows if r[4] > 1)  # a span of one bucket is gone
    both = Frame.concat([_read(kept, MIN), last]).sorted()
    _same(both, frame)
    for row in kept:  # each shortened span says where it ends now
        decoded = _read([row], MIN)
        assert decoded.bucket[-1] == row[3] and len(decoded) == row[4]


def test_a_span_whose_payload_disagrees_with_its_row_is_an_error() -> None:
    frame = _frame([1, 1, 1], [T0, T0 + MIN, T0 + 2 * MIN], 0)
    (row,) = span_rows(MIN, frame, WINDOW)
    with pytest.raises(ValueError, match="rollup span holds 3 buckets, its row says 4"):
        frame_of_spans([(row[1], row[2], 4, row[5])], MIN)
    with pytest.raises(ValueError, match="rollup span payload does not inflate"):
        frame_of_spans([(row[1], row[2], 3, row[5][:-5])], MIN)
    with pytest.raises(ValueError, match="rollup span row says it holds 0 buckets"):
        frame_of_spans([(row[1], row[2], 3, row[5]), (row[1], row[3] + MIN, 0, row[5])], MIN)


def test_spans_written_by_deflate_still_read() -> None:
    """Spans before Zstandard: the same columns, deflated (zlib's header)."""
    frame = _frame([4] * 5, [T0 + k * MIN for k in (0, 1, 2, 5, 6)], 1)
    (row,) = span_rows(MIN, frame, WINDOW)
    assert row[5][:4] == b"\x28\xb5\x2f\xfd"  # a Zstandard frame now
    steps = np.array([0, 1, 1, 3, 1], "<i4")
    floats = np.stack([getattr(frame, c) for c in ("sum", "min", "max", "first", "last", "inc")]).astype("<f8")
    deflated = zlib.compress(steps.tobytes() + frame.count.astype("<i4").tobytes() + floats.tobytes(), 1)
    _same(frame_of_spans([(4, T0, 5, deflated)], MIN), frame)
    _same(frame_of_spans([(4, T0, 5, row[5])], MIN), frame)
    bomb = zlib.compress(bytes(56 * 3_000_000), 9)  # a corrupt row: inflated no further than its 5 buckets
    with pytest.raises(ValueError, match="rollup span holds more than 5 buckets, its row says 5"):
        frame_of_spans([(4, T0, 5, bomb)], MIN)
    with pytest.raises(ValueError, match="rollup span payload does not inflate: the deflate stream is cut"):
        frame_of_spans([(4, T0, 5, deflated[: len(deflated) // 2])], MIN)
    with pytest.raises(ValueError, match="rollup span payload does not inflate"):
        frame_of_spans([(4, T0, 5, b"\x78\x01garbage")], MIN)


def test_a_frame_that_claims_another_size_is_refused_unread() -> None:
    """The frame's header says its size: a corrupt one claiming gigabytes is not inflated."""
    frame = _frame([1, 1, 1], [T0, T0 + MIN, T0 + 2 * MIN], 0)
    (row,) = span_rows(MIN, frame, WINDOW)
    huge = zstandard.ZstdCompressor(level=1).compress(bytes(56 * 3_000_000))
    with pytest.raises(ValueError, match="rollup span holds 3000000 buckets, its row says 3"):
        frame_of_spans([(row[1], row[2], 3, huge)], MIN)
    unsized = zstandard.ZstdCompressor(level=1, write_content_size=False).compress(bytes(56 * 3))
    with pytest.raises(ValueError, match="holds an unknown number of buckets, its row says 3"):
        frame_of_spans([(row[1], row[2], 3, unsized)], MIN)
    with pytest.raises(ValueError, match="rollup span payload does not inflate"):
        frame_of_spans([(row[1], row[2], 3, row[5][:4] + b"\xff" * 12)], MIN)


def test_steady_buckets_pack_small() -> None:
    """A full span of a steady integer gauge (a minute of 15 s scrapes per bucket) packs well
    under its 56 B a bucket; gaps in the buckets come back where they were."""
    n = 120
    util = np.arange(n, dtype=np.float64) % 7
    frame = Frame(np.ones(n, np.int64), T0 + np.arange(n) * MIN, np.full(n, 4), util * 4, util, util, util, util,
                  np.zeros(n))
    (row,) = span_rows(MIN, frame, WINDOW)
    assert len(row[5]) < 0.2 * 56 * n
    gappy = frame.take(np.r_[0:10, 30:50, 119])
    (row,) = span_rows(MIN, gappy, WINDOW)
    _same(_read([row], MIN), gappy)


def _spans(store: object, resolution: int) -> list[tuple[int, int, int, int]]:
    engine = store.engine  # type: ignore[attr-defined]
    t = schema.rollup_spans.c
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(  # type: ignore[misc]
            select(t.series_id, t.first_ms, t.last_ms, t.n).where(t.resolution_ms == resolution)
            .order_by(t.series_id, t.first_ms))]


def test_a_checkpoint_writes_one_span_per_series_resolution_and_chunk_range(make_store: StoreFactory) -> None:
    store = make_store(StoreOptions(chunk_range_ms=WINDOW, head_retain_ms=0, checkpoint_grace_ms=0))
    keys = [SeriesKey.of("gpu_util", gpu=str(g)) for g in range(3)]
    for i in range(4 * 240):  # 4 h at 15 s
        store.clock.set(T0 + i * 15_000)
        store.append(SampleBatch.one_per_key(keys, T0 + i * 15_000, np.full(3, float(i % 7))))
    store.checkpoint(force=True)
    minute, hour = _spans(store, MIN), _spans(store, HOUR)
    assert [(f - T0, last - T0, n) for s, f, last, n in minute if s == minute[0][0]] == [
        (0, WINDOW - MIN, 120), (WINDOW, 2 * WINDOW - MIN, 120)]
    assert len(minute) == 6 and len(hour) == 6 and all(n == 2 for *_, n in hour)


def test_a_bucket_cut_by_an_idle_flush_is_stored_once_and_exactly(make_store: StoreFactory) -> None:
    opts = StoreOptions(idle_flush_ms=30 * MIN, chunk_range_ms=WINDOW, checkpoint_grace_ms=0)
    store = make_store(opts)
    key = SeriesKey.of("tokens_total", gpu="0")
    values: list[tuple[int, float]] = []

    def send(ts: int, v: float) -> None:
        store.clock.set(ts)
        store.append(SampleBatch.one_per_key([key], ts, np.asarray([v])))
        values.append((ts, v))

    for i in range(40):  # 10:00 .. 10:09:45, a counter
        send(T0 + i * 15_000, float(10 * i))
    send(T0 + 10 * MIN + 5_000, 400.0)  # 10:10:05, then silence: the idle flush cuts 10:10 in two
    store.clock.set(T0 + 45 * MIN)
    store.maintain()
    cut = _spans(store, MIN)
    assert cut and cut[-1][2] == T0 + 10 * MIN  # the flushed part ends in the cut bucket
    send(T0 + 10 * MIN + 50_000, 3.0)  # resumes inside that bucket, after a counter reset
    for i in range(1, 20):
        send(T0 + 11 * MIN + i * 15_000, 3.0 + i)
    store.checkpoint(force=True)
    spans = _spans(store, MIN)
    engine = store.engine
    t = schema.rollup_spans.c
    with engine.connect() as conn:
        rows = conn.execute(select(t.series_id, t.first_ms, t.n, t.payload).where(t.resolution_ms == MIN)
                            .order_by(t.series_id, t.first_ms)).all()
    stored = frame_of_spans([tuple(r) for r in rows], MIN)
    assert np.all(np.diff(stored.bucket) > 0), spans  # every bucket once
    ts = np.asarray([t_ for t_, _ in values], np.int64)
    val = np.asarray([v for _, v in values])
    expected = regroup(Frame.from_samples(np.full(len(ts), stored.sid[0]), ts, val), MIN)
    _same(stored, expected)
    got = Reader(store).range(RangeQuery(Selector("tokens_total"), T0, T0 + 16 * MIN - 1, MIN, "increase"))
    assert got[0].source.startswith("rollup")
    assert got[0].values[10] == pytest.approx(400.0 - 390.0 + 3.0)  # 10:09:45 -> 10:10:05, then a reset to 3
