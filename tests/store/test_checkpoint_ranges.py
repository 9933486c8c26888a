"""A checkpoint merges the head a range of series at a time: the same chunks, rollups and
trimmed head as one merge of the whole head, with temporaries bounded by the range; and the
pieces it keeps join into one block."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

import store.checkpoint as checkpoint_module
from infermeter import db
from store import ManualClock, SampleBatch, SeriesKey, StoreOptions, TimeSeriesStore, create_store_engine
from store.head import Head
from store.head_blocks import _Block
from store.head_frozen import Frozen
from store.head_packed import PackedBlock, joined, pack_dense
from tests.store.test_head_packed import _pieces_of, _same_bits, blocks

T0 = 1_800_000_000_000
HOUR = 3_600_000


def _columns(block: object) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    usid, offs, ts, val = block.run()  # type: ignore[attr-defined]
    return usid, offs, ts, val


def _assert_same(got: object, want: object) -> None:
    g, w = _columns(got), _columns(want)
    assert np.array_equal(g[0], w[0]) and np.array_equal(g[1], w[1]) and np.array_equal(g[2], w[2])
    assert _same_bits(g[3], w[3])
    assert (got.min_ts, got.max_ts, len(got)) == (want.min_ts, want.max_ts, len(want))  # type: ignore[attr-defined]


def _split(block: _Block, cuts: list[int]) -> list[_Block]:
    """``block`` cut between series at positions ``cuts``."""
    bounds = sorted({0, len(block.usid), *[c for c in cuts if 0 < c < len(block.usid)]})
    return [_Block(*block.part(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]


@settings(max_examples=200, deadline=None)
@given(blocks(), st.lists(st.integers(1, 11), max_size=4), st.lists(st.booleans(), min_size=5, max_size=5))
def test_packed_pieces_of_consecutive_series_join_into_the_block_packed_whole(
        block: _Block, cuts: list[int], in_time_pieces: list[bool]) -> None:
    # each piece of series either whole or cut into time pieces (store.head_pieces) of its own
    pieces = []
    for p, cut in zip(_split(block, cuts), in_time_pieces):
        with _pieces_of(cut):
            pieces.append(PackedBlock(p))
    whole = PackedBlock.join(pieces)
    _assert_same(whole, block)
    assert np.array_equal(whole.firsts(), block.firsts())
    sids = block.usid[::2].copy()
    for a, b in zip(whole.slices(sids, block.min_ts, block.max_ts), block.slices(sids, block.min_ts, block.max_ts)):
        assert np.array_equal(a.view(np.int64), b.view(np.int64))
    middle = (block.min_ts + block.max_ts) // 2  # a window that cuts the time pieces
    for a, b in zip(whole.slices(sids, middle, block.max_ts), block.slices(sids, middle, block.max_ts)):
        assert np.array_equal(a.view(np.int64), b.view(np.int64))


def _scrapes(n_series: int, n_samples: int, first_id: int = 0) -> _Block:
    rng = np.random.default_rng(n_series + n_samples)
    sid = np.repeat(np.arange(first_id, first_id + n_series, dtype=np.int64), n_samples)
    ts = T0 + np.tile(np.arange(n_samples, dtype=np.int64) * 1_000, n_series) + rng.integers(0, 5, len(sid))
    return _Block.of(sid, ts, np.round(rng.uniform(0, 100, len(sid)), 3))


def test_joined_pieces_are_packed_as_the_whole_would_be() -> None:
    large = [pack_dense(_scrapes(1_000, 100, k * 1_000)) for k in range(3)]  # 300 k samples in all
    assert all(isinstance(p, PackedBlock) for p in large)
    assert isinstance(joined(large), PackedBlock)
    small = [pack_dense(_scrapes(100, 40, k * 100)) for k in range(3)]  # dense, but 12 k samples in all
    assert all(isinstance(p, PackedBlock) for p in small)
    whole = joined(small)
    assert isinstance(whole, _Block)  # packed pieces of a small whole come back plain
    _assert_same(whole, _Block.of(*np.concatenate([np.stack([p.sid(), p.run()[2]]) for p in small], axis=1),
                                  np.concatenate([p.run()[3] for p in small])))
    sparse = _scrapes(5_000, 2)
    assert pack_dense(sparse) is sparse  # two samples a series: the per-series fields cost more
    assert len(joined([])) == 0


def _head(n_series: int, scrapes: int, seal_every: int, out_of_order: bool = False) -> Head:
    """A head of packed and plain blocks and a pending batch; every third series missing from
    every fifth scrape, ids with gaps."""
    head = Head()
    rng = np.random.default_rng(11)
    sids = np.arange(n_series, dtype=np.int64) * 3 + 1
    for i in range(scrapes):
        chosen = sids if i % 5 else sids[np.arange(n_series) % 3 != 0]
        ts = np.full(len(chosen), T0 + i * 1_000, np.int64) + rng.integers(0, 4, len(chosen))
        if out_of_order and i == scrapes - 3:
            ts = ts - 30_000  # a late batch, older than what the head holds
        head.add(chosen, ts, rng.integers(0, 100, len(chosen)).astype(np.float64))
        if i % seal_every == seal_every - 1:
            head.seal()
    return head


@pytest.mark.parametrize("out_of_order", [False, True])
@pytest.mark.parametrize("budget", [1, 997, 40_000, 1 << 40])
def test_merged_slices_hold_what_one_merge_of_the_whole_head_holds(budget: int, out_of_order: bool) -> None:
    head = _head(2_000, 90, seal_every=20, out_of_order=out_of_order)
    frozen = head.frozen()
    assert frozen.pending or not out_of_order
    columns = [(b.sid(), b.run()[2], b.run()[3]) for b in frozen.blocks] + list(frozen.pending)
    sid, ts, val = (np.concatenate([c[k] for c in columns]) for k in range(3))
    order = np.lexsort((ts, sid))  # every sample, sorted by series, then time
    want = _Block.of(sid[order], ts[order], val[order])
    pieces = list(frozen.merged_slices(len(frozen.blocks), budget))
    if budget == 1 << 40:
        assert len(pieces) == 1
    elif budget == 997:
        assert len(pieces) > 100 and max(len(p) for p in pieces) < 997 + 90  # a series is never cut
    _assert_same(joined(pieces), want)


def _store(path: Path, series: int, scrapes: int) -> TimeSeriesStore:
    """A SQLite store (inline checkpoints) with ``scrapes`` 1 s scrapes of ``series`` gauges,
    every third series missing from every fifth scrape, starting 90 s before a 2 h boundary."""
    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    start = (T0 // (2 * HOUR) + 1) * 2 * HOUR - 90_000
    store = TimeSeriesStore(engine, ManualClock(start), StoreOptions(out_of_order_window_ms=30_000))
    store.open()
    keys = [SeriesKey.of("gpu_power_watts", gpu=str(g)) for g in range(series)]
    rng = np.random.default_rng(3)
    for i in range(scrapes):
        ts = start + i * 1_000
        store.clock.set(ts)  # type: ignore[attr-defined]
        chosen = [k for g, k in enumerate(keys) if i % 5 or g % 3]
        store.append(SampleBatch.one_per_key(chosen, ts, np.round(rng.uniform(50, 700, len(chosen)), 3)))
    return store


def _rows(store: TimeSeriesStore) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with store.engine.connect() as conn:
        chunks = conn.execute(text("SELECT series_id, start_ms, end_ms, n, encoding, data FROM chunks ORDER BY 1, 2")).all()
        spans = conn.execute(text("SELECT resolution_ms, series_id, first_ms, last_ms, n, payload "
                                  "FROM rollup_spans ORDER BY 1, 2, 3")).all()
    return [tuple(r) for r in chunks], [tuple(r) for r in spans]


@pytest.mark.parametrize("merge_samples", [1, 4_999])
def test_a_checkpoint_range_by_range_writes_and_keeps_what_one_of_the_whole_head_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_samples: int) -> None:
    """Past the 2 h boundary and the out-of-order window, the appends checkpoint: the samples
    before the boundary are written and the head keeps the rest, the same range by range."""
    ranges: list[int] = []
    real = Frozen.merged_slices

    def counted(self: Frozen, upto: int, budget: int) -> Iterator[_Block]:
        for block in real(self, upto, budget):
            ranges.append(len(block))
            yield block

    monkeypatch.setattr(Frozen, "merged_slices", counted)
    monkeypatch.setattr(checkpoint_module, "MERGE_SAMPLES", 1 << 40)
    whole = _store(tmp_path / "whole.db", 300, 150)
    assert len(ranges) == 1
    ranges.clear()
    monkeypatch.setattr(checkpoint_module, "MERGE_SAMPLES", merge_samples)
    sliced = _store(tmp_path / "sliced.db", 300, 150)
    try:
        assert sliced.stats["flushed"] == whole.stats["flushed"] > 0
        if merge_samples == 1:
            assert len(ranges) == 300  # a range for each series
        else:
            assert 5 <= len(ranges) <= 12 and max(ranges) <= merge_samples + 150, ranges
        assert _rows(sliced) == _rows(whole)
        for got, want in zip(sliced.head.columns(), whole.head.columns()):
            assert np.array_equal(got, want)
        assert sliced.head.samples == whole.head.samples > 0
    finally:
        for store in (whole, sliced):
            store.close(flush=False)
            store.engine.dispose()


def test_a_checkpoint_holds_its_temporaries_for_a_range_of_series_not_for_the_head(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Merging the whole head first held every sample unpacked with its masks and copies
    (~50 bytes a sample): tracemalloc's peak over the checkpoint, per sample flushed."""
    peaks = {}
    for merge_samples in (1 << 14, 1 << 40):
        store = _store(tmp_path / f"{merge_samples}.db", 8_000, 100)  # none due yet
        monkeypatch.setattr(checkpoint_module, "MERGE_SAMPLES", merge_samples)
        monkeypatch.setattr(checkpoint_module, "SLICE_SAMPLES", 1 << 14)
        try:
            with store.lock:
                store.head.seal()  # the scrapes' batches into blocks first: not the checkpoint's
            tracemalloc.start()
            flushed = store.checkpoint(force=True)
            peaks[merge_samples] = tracemalloc.get_traced_memory()[1] / flushed
        finally:
            tracemalloc.stop()
            store.close(flush=False)
            store.engine.dispose()
    assert peaks[1 << 14] < 20, peaks
    assert peaks[1 << 40] > 2 * peaks[1 << 14], peaks
