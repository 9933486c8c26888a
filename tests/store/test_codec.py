"""Chunk and write-ahead encodings: bit-exact round trips and clear errors on corruption."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.codec import ChunkDecodeError, decode, encode, encode_segments
from store.types import STALE_NAN
from store.wal import WalDecodeError, decode_wal, encode_wal


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a.view(np.uint64), b.view(np.uint64)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=10**7), min_size=1, max_size=300),
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=300),
    st.integers(min_value=0, max_value=2**45),
)
def test_any_samples_round_trip_bit_exact(gaps: list[int], values: list[float], start: int) -> None:
    n = min(len(gaps), len(values))
    ts = start + np.cumsum(np.asarray(gaps[:n], dtype=np.int64))
    vals = np.asarray(values[:n], dtype=np.float64)
    out_ts, out_vals = decode(encode(ts, vals), n)
    assert np.array_equal(out_ts, ts)
    assert _same_bits(out_vals, vals)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.decimals(min_value=-10**6, max_value=10**6, places=3, allow_nan=False), min_size=1, max_size=200))
def test_short_decimals_take_the_integer_path_and_round_trip(values: list[object]) -> None:
    vals = np.asarray([float(v) for v in values], dtype=np.float64)  # type: ignore[arg-type]
    ts = 1_800_000_000_000 + np.arange(len(vals), dtype=np.int64) * 15_000
    out_ts, out_vals = decode(encode(ts, vals), len(vals))
    assert _same_bits(out_vals, vals) and np.array_equal(out_ts, ts)


def test_realistic_gpu_series_compress_well() -> None:
    rng = np.random.default_rng(3)
    n = 480
    ts = 1_800_000_000_000 + np.arange(n, dtype=np.int64) * 15_000 + rng.integers(-5, 5, n)
    util = np.clip(50 + rng.integers(-3, 4, n).cumsum(), 0, 100).astype(np.float64)
    power = np.round(300 + rng.normal(0, 1, n).cumsum(), 3)
    assert len(encode(ts, util)) / n < 2.0
    assert len(encode(ts, power)) / n < 4.0


def test_segments_encode_like_single_chunks() -> None:
    rng = np.random.default_rng(1)
    parts = [(np.arange(k, dtype=np.int64) * 1000 + 5, rng.random(k)) for k in (1, 2, 7, 50)]
    parts.append((np.arange(3, dtype=np.int64), np.asarray([1.0, STALE_NAN, 2.5])))
    ts = np.concatenate([p[0] for p in parts])
    vals = np.concatenate([p[1] for p in parts])
    starts = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
    blobs = encode_segments(ts, vals, starts)
    for blob, (pts, pvals) in zip(blobs, parts):
        out_ts, out_vals = decode(blob, len(pts))
        assert np.array_equal(out_ts, pts) and _same_bits(out_vals, pvals)


def test_corrupt_chunks_and_wal_rows_raise_typed_errors() -> None:
    blob = encode(np.arange(10, dtype=np.int64), np.arange(10, dtype=np.float64))
    with pytest.raises(ChunkDecodeError):
        decode(b"garbage", 10)
    with pytest.raises(ChunkDecodeError, match="truncated"):
        decode(blob, 1000)
    payload = encode_wal(np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int64), np.ones(3))
    sid, ts, val = decode_wal(payload)
    assert sid.tolist() == [0, 1, 2] and val.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(WalDecodeError):
        decode_wal(payload[:-3])
