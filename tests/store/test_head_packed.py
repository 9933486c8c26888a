"""Packed head blocks (store.head_packed): bit-exact round trips, the same window reads as a
plain block, and the head's reads unchanged when its large blocks are packed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import store.head_packed as head_packed
import store.head_pieces as head_pieces
from store.head import Head
from store.head_blocks import _Block
from store.head_packed import PackedBlock, pack_if_large

STALE_NAN = np.array([0x7FF0000000000002], np.uint64).view(np.float64)[0]  # Prometheus' staleness marker
T0 = 1_733_400_000_000

_VALUE_KINDS = st.sampled_from(["counter", "int_gauge", "decimals", "random", "specials", "huge", "constant"])


def _values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "counter":  # first seen at a large value, restarts to zero once
        v = 7_340_032.0 + np.cumsum(rng.integers(0, 3_000, n)).astype(np.float64)
        if n > 4:
            v[n // 2 :] -= v[n // 2]
        return v
    if kind == "int_gauge":
        return rng.integers(-50, 100, n).astype(np.float64)
    if kind == "decimals":
        return np.round(rng.uniform(0, 700, n), 3)
    if kind == "random":
        return rng.standard_normal(n) * 1e6
    if kind == "specials":
        return rng.choice(np.array([np.nan, STALE_NAN, np.inf, -np.inf, -0.0, 0.0, 1.5]), n)
    if kind == "huge":  # integers past 2**53 and near the int64 edge
        return rng.choice(np.array([2.0**53 + 2, 2.0**62, -(2.0**63), 9.2e18, 1e300]), n)
    return np.full(n, 42.0)


def _timestamps(n: int, rng: np.random.Generator, gap_kind: int) -> np.ndarray:
    if gap_kind == 0:  # a perfectly regular clock
        steps = np.full(n, 15_000)
    elif gap_kind == 1:  # 1 s scrapes with a few ms of jitter and one long stall
        steps = 1_000 + rng.integers(-4, 5, n)
        if n > 3:
            steps[n // 3] = 3_600_000
    else:  # anything up to days apart
        steps = rng.integers(1, 10**9, n)
    return T0 + np.cumsum(steps).astype(np.int64)


@st.composite
def blocks(draw: st.DrawFn) -> _Block:
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_series = draw(st.integers(1, 12))
    sids, ts, val = [], [], []
    for k in range(n_series):
        n = draw(st.integers(1, 40))
        sids.append(np.full(n, 3 * k + 1, np.int64))
        ts.append(_timestamps(n, rng, draw(st.integers(0, 2))))
        val.append(_values(draw(_VALUE_KINDS), n, rng))
    return _Block.of(np.concatenate(sids), np.concatenate(ts), np.concatenate(val))


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.view(np.int64), b.view(np.int64))


@contextmanager
def _slices_of(samples: int) -> Iterator[None]:
    """Whole blocks packed and unpacked ``samples`` at a time (many slices in a small block)."""
    saved = head_packed._SLICE
    head_packed._SLICE = samples
    try:
        yield
    finally:
        head_packed._SLICE = saved


@contextmanager
def _pieces_of(cut: bool) -> Iterator[None]:
    """``cut``: blocks cut into time pieces of 2 samples a series and 1 ms or more (however few
    samples the drawn blocks have), else the defaults (which leave them whole)."""
    saved = head_pieces.PIECE_PER_SERIES, head_pieces.PIECE_MIN_MS
    if cut:
        head_pieces.PIECE_PER_SERIES, head_pieces.PIECE_MIN_MS = 2, 1
    try:
        yield
    finally:
        head_pieces.PIECE_PER_SERIES, head_pieces.PIECE_MIN_MS = saved


@settings(max_examples=300, deadline=None)
@given(blocks(), st.sampled_from([1, 5, 37, 1 << 18]), st.booleans())
def test_a_packed_block_gives_back_every_sample_bit_for_bit(block: _Block, slice_samples: int, cut: bool) -> None:
    with _slices_of(slice_samples), _pieces_of(cut):
        packed = PackedBlock(block)
        usid, offs, ts, val = packed.run()
    assert np.array_equal(usid, block.usid) and np.array_equal(offs, block.offs)
    assert np.array_equal(ts, block.ts)
    assert _same_bits(val, block.val)
    assert np.array_equal(packed.firsts(), block.firsts())
    assert (packed.min_ts, packed.max_ts, len(packed)) == (block.min_ts, block.max_ts, len(block))


@settings(max_examples=300, deadline=None)
@given(blocks(), st.data())
def test_a_packed_block_answers_windows_as_the_plain_block_does(block: _Block, data: st.DataObject) -> None:
    with _slices_of(data.draw(st.sampled_from([1, 23, 1 << 18]))), _pieces_of(data.draw(st.booleans())):
        packed = PackedBlock(block)
    # ids asked: present and absent ones, in any order
    sids = np.array(data.draw(st.lists(st.integers(0, 40), min_size=1, max_size=15, unique=True)), np.int64)
    start = data.draw(st.integers(block.min_ts - 10, block.max_ts + 10))
    end = data.draw(st.integers(start - 5, block.max_ts + 2_000_000_000))
    counts, ts, val = packed.slices(sids, start, end)
    want_counts, want_ts, want_val = block.slices(sids, start, end)
    assert np.array_equal(counts, want_counts)
    assert np.array_equal(ts, want_ts)
    assert _same_bits(val, want_val)


def _scrape_like_block(n_series: int, n_samples: int, seed: int = 7) -> _Block:
    """Scrapes every second with jitter: counters, integer gauges, 3-decimal gauges."""
    rng = np.random.default_rng(seed)
    ts = T0 + np.arange(n_samples)[None, :] * 1_000 + rng.integers(0, 6, (n_series, n_samples))
    kind = np.arange(n_series) % 3
    val = np.empty((n_series, n_samples))
    val[kind == 0] = 1e6 + np.cumsum(rng.integers(0, 200, ((kind == 0).sum(), n_samples)), axis=1)
    val[kind == 1] = rng.integers(0, 100, ((kind == 1).sum(), n_samples))
    val[kind == 2] = np.round(rng.uniform(30, 80, ((kind == 2).sum(), n_samples)), 3)
    sid = np.repeat(np.arange(n_series, dtype=np.int64), n_samples)
    return _Block.of(sid, ts.ravel().astype(np.int64), val.ravel())


def test_scrape_shaped_samples_take_a_few_bytes_instead_of_sixteen() -> None:
    block = _scrape_like_block(3_000, 120)
    packed = PackedBlock(block)
    assert packed.nbytes / len(block) < 4.0, packed.nbytes / len(block)
    assert block.nbytes / len(block) >= 16.0


def test_three_decimal_gauges_take_three_bytes_a_value() -> None:
    """Steps of a gauge with three decimals over a range of 100 pass 16 bits but not 24: three
    bytes a value, plus the timestamps' jitter (one byte) and half a byte of per-series fields
    (5.4 bytes a sample when such steps took an int32)."""
    rng = np.random.default_rng(3)
    n_series, n_samples = 2_000, 120
    ts = T0 + np.arange(n_samples)[None, :] * 1_000 + rng.integers(0, 6, (n_series, n_samples))
    val = np.round(rng.uniform(0, 100, (n_series, n_samples)), 3)
    block = _Block.of(np.repeat(np.arange(n_series, dtype=np.int64), n_samples), ts.ravel(), val.ravel())
    packed = PackedBlock(block)
    assert packed.nbytes / len(block) < 4.6, packed.nbytes / len(block)
    assert _same_bits(packed.run()[3], block.val)


@pytest.mark.parametrize("step", [(1 << 23) - 1, -(1 << 23), 1 << 23, -(1 << 23) - 1, 1 << 15, -(1 << 15) - 1])
def test_steps_at_the_edges_of_three_bytes_come_back_exact(step: int) -> None:
    """Integer series whose largest step is at (or one past) the edge of 24 bits, beside ones of
    other widths in the same block: every value back bit for bit, whichever pool it took."""
    rng = np.random.default_rng(abs(step))
    n = 40
    runs = [
        np.cumsum(np.where(np.arange(n) % 7 == 3, step, rng.integers(-5, 6, n))).astype(np.float64),
        np.cumsum(rng.integers(-100, 100, n)).astype(np.float64),  # one byte... two
        np.round(rng.uniform(0, 700, n), 3),  # three
        np.cumsum(rng.integers(0, 1 << 30, n)).astype(np.float64),  # four
        rng.standard_normal(n),  # raw bits: eight
    ]
    sid = np.repeat(np.arange(len(runs), dtype=np.int64), n)
    ts = np.tile(T0 + np.arange(n, dtype=np.int64) * 1_000, len(runs))
    block = _Block.of(sid, ts, np.concatenate(runs))
    for slice_samples in (1, 37, 1 << 18):  # one slice per series and many: the pools concatenated
        with _slices_of(slice_samples):
            packed = PackedBlock(block)
            assert _same_bits(packed.run()[3], block.val)
        counts, _, val = packed.slices(np.array([4, 0, 2], np.int64), T0, T0 + 10**9)
        assert counts.tolist() == [n, n, n]
        assert _same_bits(val, np.concatenate([runs[4], runs[0], runs[2]]))


def test_only_blocks_with_enough_samples_per_series_are_packed() -> None:
    wide = _scrape_like_block(20_000, 14)  # 280 k samples, 14 a series: the fields would not pay
    assert isinstance(pack_if_large(wide), _Block)
    deep = _scrape_like_block(4_000, 70)  # 280 k samples, 70 a series
    assert isinstance(pack_if_large(deep), PackedBlock)
    small = _scrape_like_block(100, 100)
    assert isinstance(pack_if_large(small), _Block)


@pytest.mark.parametrize("pack", [False, True])
def test_the_heads_reads_are_the_same_whether_its_blocks_are_packed(monkeypatch: pytest.MonkeyPatch, pack: bool) -> None:
    if pack:
        monkeypatch.setattr(head_packed, "PACK_MIN_SAMPLES", 1)
        monkeypatch.setattr(head_packed, "PACK_MIN_PER_SERIES", 1)
    rng = np.random.default_rng(3)
    head = Head()
    n_series, scrapes = 50, 400
    expected_ts: dict[int, list[int]] = {s: [] for s in range(n_series)}
    expected_val: dict[int, list[float]] = {s: [] for s in range(n_series)}
    for i in range(scrapes):
        live = np.flatnonzero(rng.random(n_series) < 0.9)  # some series miss some scrapes
        ts = np.full(len(live), T0 + i * 1_000 + int(rng.integers(0, 5)), np.int64)
        val = np.where(live % 2 == 0, rng.integers(0, 10, len(live)).astype(np.float64), rng.standard_normal(len(live)))
        head.add(live.astype(np.int64), ts, val)
        for s, t, v in zip(live.tolist(), ts.tolist(), val.tolist()):
            expected_ts[s].append(t)
            expected_val[s].append(v)
        if i % 37 == 0:
            head.window(np.array([0], np.int64), T0, T0 + 10**9)  # reads seal; merges grow blocks
    sids = np.array([7, 0, 31, 99], np.int64)
    start, end = T0 + 100_000, T0 + 250_000

    def check() -> None:
        starts, counts, ts, val = head.window(sids, start, end)
        for i, s in enumerate(sids.tolist()):
            want = [(t, v) for t, v in zip(expected_ts.get(s, []), expected_val.get(s, [])) if start <= t <= end]
            got = list(zip(ts[starts[i] : starts[i] + counts[i]].tolist(), val[starts[i] : starts[i] + counts[i]].tolist()))
            assert got == want

    check()  # blocks of several sizes, the large ones packed
    assert len(head._blocks) > 1
    assert any(isinstance(b, PackedBlock) for b in head._blocks) == pack
    head.compact()
    check()
    sid, all_ts, _ = head.columns()
    assert len(sid) == sum(len(v) for v in expected_ts.values())
    assert all_ts[sid == 0].tolist() == expected_ts[0]


def test_a_window_asking_for_every_series_in_another_order_gets_each_its_own_samples() -> None:
    block = _scrape_like_block(6, 50)
    packed = PackedBlock(block)
    sids = np.array([5, 3, 0, 1, 4, 2], np.int64)  # every series of the block, out of order
    counts, ts, val = packed.slices(sids, T0 - 1, T0 + 10**9)
    want_counts, want_ts, want_val = block.slices(sids, T0 - 1, T0 + 10**9)
    assert np.array_equal(counts, want_counts) and np.array_equal(ts, want_ts)
    assert _same_bits(val, want_val)
