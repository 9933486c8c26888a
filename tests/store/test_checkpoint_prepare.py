"""A checkpoint's prepare works a range of series at a time: the same samples to flush and the
same trimmed head as one merge of the whole head, with temporaries bounded by the range."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.checkpoint import Plan, prepare
from store.head import Head
from store.head_blocks import _Block
from store.head_packed import PackedBlock, joined, pack_dense
from tests.store.test_head_packed import _same_bits, blocks

T0 = 1_800_000_000_000


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
@given(blocks(), st.lists(st.integers(1, 11), max_size=4))
def test_packed_pieces_of_consecutive_series_join_into_the_block_packed_whole(block: _Block, cuts: list[int]) -> None:
    pieces = [PackedBlock(p) for p in _split(block, cuts)]
    whole = PackedBlock.join(pieces)
    _assert_same(whole, block)
    assert np.array_equal(whole.firsts(), block.firsts())
    sids = block.usid[::2].copy()
    for a, b in zip(whole.slices(sids, block.min_ts, block.max_ts), block.slices(sids, block.min_ts, block.max_ts)):
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
    want = frozen.merged()
    pieces = list(frozen.merged_slices(len(frozen.blocks), budget))
    if budget == 1 << 40:
        assert len(pieces) == 1
    elif budget == 997:
        assert len(pieces) > 100 and max(len(p) for p in pieces) < 997 + 90  # a series is never cut
    _assert_same(joined(pieces), want)


def _plan(head: Head, cutoff_s: int, keep_s: int) -> Plan:
    n = head.capacity
    head.seal()
    cutoff = np.full(n, T0 + cutoff_s * 1_000, np.int64)
    keep = np.full(n, T0 + keep_s * 1_000, np.int64)
    return Plan(cutoff, keep, np.arange(n, dtype=np.int64), head.flushed_until.copy(), head.frozen(), [])


@pytest.mark.parametrize("budget", [1, 5_000, 1 << 40])
def test_a_prepare_range_by_range_flushes_and_keeps_what_one_of_the_whole_head_does(budget: int) -> None:
    head = _head(3_000, 120, seal_every=10)
    whole = prepare(_plan(head, 100, 60), slice_samples=1 << 40)
    paused: list[int] = []
    sliced = prepare(_plan(head, 100, 60), lambda: paused.append(1), slice_samples=budget)
    assert sliced.samples == whole.samples > 0
    _assert_same(sliced.flush, whole.flush)
    assert whole.trimmed is not None and sliced.trimmed is not None
    assert len(sliced.trimmed) == len(whole.trimmed)
    for got, want in zip(sliced.trimmed, whole.trimmed):
        _assert_same(got, want)
    if budget == 1 << 40:
        assert len(paused) == 1
    elif budget == 1:  # a range for each of the 3,000 series
        assert len(paused) == 3_000
    else:  # ~93 samples a series in the blocks merged (the newest stay untouched): ~54 series a range
        assert 45 < len(paused) < 70, len(paused)
    assert sliced.flush.run()[2].max() < T0 + 100_000 and np.all(sliced.trimmed[0].run()[2] >= T0 + 60_000)


def test_a_prepare_holds_its_temporaries_for_a_range_of_series_not_for_the_head() -> None:
    """A whole-head merge held every sample unpacked with its masks and copies (~50 bytes a
    sample): tracemalloc's peak over the call is what prepare itself allocated."""
    head = _head(20_000, 100, seal_every=10)
    peaks = {}
    for budget in (1 << 16, 1 << 40):
        plan = _plan(head, 70, 70)
        tracemalloc.start()
        try:
            prepare(plan, slice_samples=budget)
            peaks[budget] = tracemalloc.get_traced_memory()[1] / head.samples
        finally:
            tracemalloc.stop()
    assert peaks[1 << 16] < 16, peaks  # the packed results, and one range's temporaries
    assert peaks[1 << 40] > 2 * peaks[1 << 16], peaks
