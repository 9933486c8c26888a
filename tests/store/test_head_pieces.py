"""Time pieces of packed head blocks (store.head_pieces): a read of a short window decodes about
that window, not the whole block; blocks of fast scrapes stay whole."""

from __future__ import annotations

import numpy as np
import pytest

from store.head_blocks import _Block
from store.head_packed import PackedBlock
from store.head_pieces import PIECE_MIN_MS, PIECE_PER_SERIES, cut, overlapping
from tests.store.test_head_packed import T0, _same_bits

MINUTE = 60_000


def _fleet(n_series: int, minutes: int, every_ms: int, seed: int = 5) -> _Block:
    """GPU-shaped series (3-decimal power, integer utilisation, an energy counter) scraped every
    ``every_ms`` with a few ms of jitter; a fifth of them start a third of the way in and a fifth
    stop two thirds of the way (a target added, one gone)."""
    rng = np.random.default_rng(seed)
    n = minutes * MINUTE // every_ms
    sids, ts, val = [], [], []
    for k in range(n_series):
        lo, hi = (n // 3 if k % 5 == 1 else 0), (2 * n // 3 if k % 5 == 2 else n)
        t = T0 + np.arange(lo, hi, dtype=np.int64) * every_ms + rng.integers(0, 4, hi - lo)
        kind = k % 3
        v = (np.round(rng.uniform(80, 700, hi - lo), 3) if kind == 0 else
             rng.integers(0, 101, hi - lo).astype(np.float64) if kind == 1 else
             5e9 + np.cumsum(rng.integers(0, 400_000, hi - lo)).astype(np.float64))
        sids.append(np.full(hi - lo, 2 * k + 1, np.int64))
        ts.append(t)
        val.append(v)
    return _Block.of(np.concatenate(sids), np.concatenate(ts), np.concatenate(val))


def test_a_long_block_of_slow_scrapes_is_cut_into_pieces_of_its_time() -> None:
    block = _fleet(60, 120, 15_000)  # two hours at 15 s: up to 480 samples a series, 416 on average
    pieces = cut(block.offs, block.ts, block.min_ts, block.max_ts)
    assert pieces.starts is not None
    runs = np.diff(pieces.starts)
    # 416 samples a series in pieces of >= 32 samples and >= 5 minutes: 13 pieces of 9.2 minutes
    assert runs.max() == 13
    assert runs.min() >= 1
    lengths = np.diff(pieces.offs)
    assert lengths.min() >= 1 and int(lengths.sum()) == len(block)
    # every run lies within one series and one piece of time, in order
    edges = block.min_ts + np.arange(1, 13) * ((block.max_ts - block.min_ts + 1) // 13)
    owner = np.repeat(np.arange(len(block.usid)), np.diff(block.offs))
    for a, b in zip(pieces.offs[:-1], pieces.offs[1:]):
        assert owner[a] == owner[b - 1]
        assert np.searchsorted(edges, block.ts[a], "right") == np.searchsorted(edges, block.ts[b - 1], "right")


def test_a_block_of_fast_scrapes_or_a_short_one_stays_whole() -> None:
    fast = _fleet(60, 2, 1_000)  # two minutes at 1 s: 120 samples a series, shorter than a piece
    assert cut(fast.offs, fast.ts, fast.min_ts, fast.max_ts).starts is None
    sparse = _fleet(60, 120, 5 * MINUTE)  # two hours at 5 min: 24 samples a series
    assert cut(sparse.offs, sparse.ts, sparse.min_ts, sparse.max_ts).starts is None
    assert PIECE_MIN_MS >= 5 * MINUTE and PIECE_PER_SERIES >= 16  # the memory bound the doc gives


@pytest.mark.parametrize("window_min", [1, 5, 30])
def test_a_window_decodes_about_its_own_samples_and_answers_as_the_plain_block(
        monkeypatch: pytest.MonkeyPatch, window_min: int) -> None:
    block = _fleet(90, 120, 15_000)
    packed = PackedBlock(block)
    decoded: list[int] = []
    decode_runs = PackedBlock._decode_runs

    def counting(self: PackedBlock, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ts, val = decode_runs(self, k)
        decoded.append(len(ts))
        return ts, val

    monkeypatch.setattr(PackedBlock, "_decode_runs", counting)
    sids = block.usid.copy()
    for end in (block.max_ts, block.max_ts - 37 * MINUTE, block.min_ts + 61 * MINUTE):
        start = end - window_min * MINUTE
        got, want = packed.slices(sids, start, end), block.slices(sids, start, end)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and _same_bits(got[2], want[2])
        used = len(want[1])
        # at most the pieces the window touches: its own samples plus up to a piece (9.2
        # minutes, 37 samples) a series on either side; the whole block holds up to 480 a series
        assert decoded[-1] <= used + 2 * 37 * len(sids), (decoded[-1], used)
        assert decoded[-1] < len(block) * (window_min + 20) / 120  # of the block's two hours


def test_a_series_without_samples_in_the_window_pieces_gets_none() -> None:
    block = _fleet(10, 120, 15_000)  # series 1 and 6 start 40 minutes in, 2 and 7 stop at 80
    packed = PackedBlock(block)
    k = np.arange(len(block.usid), dtype=np.int64)
    first_ts = np.concatenate([packed.slices(block.usid[i : i + 1], 0, 2**62)[1][:1] for i in range(len(k))])
    runs, per_series = overlapping(packed._pieces, packed._first_ts, k, T0, T0 + 5 * MINUTE)
    assert per_series[1] == per_series[6] == 0  # not started yet
    assert per_series[0] == 1 and first_ts[0] < T0 + 5 * MINUTE  # its first piece (9.2 minutes) only
    late = overlapping(packed._pieces, packed._first_ts, k, T0 + 100 * MINUTE, T0 + 110 * MINUTE)[1]
    assert late[2] == late[7] == 1  # their last piece: what follows it is unknown without decoding
    counts, _, _ = packed.slices(block.usid, T0 + 100 * MINUTE, T0 + 110 * MINUTE)
    assert counts[2] == counts[7] == 0 and counts[0] > 0
    assert len(runs) == int(per_series.sum())


def test_degenerate_blocks_cut_and_read_as_the_plain_block() -> None:
    """No samples; a series of one sample beside long ones; one that has samples only in the
    block's last minutes: each is cut (or not) and read back as the plain block answers. The
    single sample and the late series lie in the same (last) piece as the end of the series
    before them: only the series' own edges keep their runs apart."""
    empty = np.empty(0, np.int64)
    nothing = cut(np.zeros(1, np.int64), empty, T0, T0)
    assert nothing.starts is None and len(nothing.offs) == 1
    long = _fleet(8, 120, 15_000)
    sids = [long.sid(), np.array([101], np.int64), np.full(4, 103, np.int64)]
    ts = [long.ts, np.array([long.max_ts - 2 * MINUTE], np.int64), long.max_ts - np.arange(3, -1, -1, dtype=np.int64) * 15_000]
    val = [long.val, np.array([7.5]), np.array([1.0, 2.0, np.nan, 4.0])]
    block = _Block.of(np.concatenate(sids), np.concatenate(ts), np.concatenate(val))
    packed = PackedBlock(block)
    assert packed._pieces.starts is not None
    runs = np.diff(packed._pieces.starts)
    assert runs[-2] == 1 and runs[-1] == 1  # the single sample and the late series: one run each
    assert np.array_equal(packed.firsts(), block.firsts())
    for start, end in ((T0, T0 + 5 * MINUTE), (long.max_ts - 3 * MINUTE, long.max_ts - MINUTE), (block.max_ts - MINUTE, block.max_ts)):
        got, want = packed.slices(block.usid, start, end), block.slices(block.usid, start, end)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and _same_bits(got[2], want[2])
