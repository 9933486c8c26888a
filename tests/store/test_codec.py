"""Chunk and write-ahead encodings: bit-exact round trips and clear errors on corruption."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from store.codec import ENCODING, ENCODINGS, ChunkDecodeError, decode, encode, encode_segments
from store.codec_v1 import ENCODING_V1
from store.types import STALE_NAN
from store.wal import WalDecodeError, decode_wal, encode_wal


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a.view(np.uint64), b.view(np.uint64)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=10**7), min_size=1, max_size=300),
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=300),
    st.integers(min_value=0, max_value=2**45),
    st.sampled_from(ENCODINGS),
)
def test_any_samples_round_trip_bit_exact(gaps: list[int], values: list[float], start: int, encoding: int) -> None:
    n = min(len(gaps), len(values))
    ts = start + np.cumsum(np.asarray(gaps[:n], dtype=np.int64))
    vals = np.asarray(values[:n], dtype=np.float64)
    out_ts, out_vals = decode(encode(ts, vals, encoding=encoding), n, encoding)
    assert np.array_equal(out_ts, ts)
    assert _same_bits(out_vals, vals)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.decimals(min_value=-10**6, max_value=10**6, places=3, allow_nan=False), min_size=1, max_size=200),
       st.sampled_from(ENCODINGS))
def test_short_decimals_take_the_integer_path_and_round_trip(values: list[object], encoding: int) -> None:
    vals = np.asarray([float(v) for v in values], dtype=np.float64)  # type: ignore[arg-type]
    ts = 1_800_000_000_000 + np.arange(len(vals), dtype=np.int64) * 15_000
    out_ts, out_vals = decode(encode(ts, vals, encoding=encoding), len(vals), encoding)
    assert _same_bits(out_vals, vals) and np.array_equal(out_ts, ts)


_BIG = 2**52 - 1  # the integer path's largest magnitude


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=-_BIG, max_value=_BIG), min_size=1, max_size=200))
@example([_BIG, -_BIG, -_BIG + 3, -_BIG + 6, -_BIG + 9]).via("a first difference whose zigzag is odd, past 2**53")
def test_extreme_integers_round_trip(values: list[int]) -> None:
    """Second differences of integers near 2**52 are near 2**54: the zigzag, the chunk head's
    varints (laid out for many chunks at once, as unsigned 64-bit integers, never floats) and the
    split into high and low bytes must keep every bit."""
    vals = np.asarray(values, dtype=np.float64)
    ts = np.arange(len(vals), dtype=np.int64) * 1000
    out_ts, out_vals = decode(encode(ts, vals), len(vals))
    assert _same_bits(out_vals, vals) and np.array_equal(out_ts, ts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=2**61), min_size=1, max_size=3), st.integers(min_value=0, max_value=2**40))
@example([5, 2**60 + 1, 1], 0).via("a first gap past 2**53 that a float64 cannot hold")
def test_timestamp_gaps_past_2_53_round_trip(gaps: list[int], start: int) -> None:
    ts = start + np.cumsum(np.asarray(gaps, dtype=np.int64))
    vals = np.arange(len(ts), dtype=np.float64)
    out_ts, out_vals = decode(encode(ts, vals), len(ts))
    assert np.array_equal(out_ts, ts) and _same_bits(out_vals, vals)


def _gpu_series(n: int = 480) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A scrape's jittered timestamps and dcgm-exporter-shaped series: integer %, W with mW
    resolution, an energy counter in mJ that starts far from zero."""
    rng = np.random.default_rng(3)
    ts = 1_800_000_000_000 + np.arange(n, dtype=np.int64) * 15_000 + rng.integers(-5, 5, n)
    watts = 300 + rng.normal(0, 4, n).cumsum()
    return {
        "util": (ts, np.clip(50 + rng.integers(-3, 4, n).cumsum(), 0, 100).astype(np.float64)),
        "power": (ts, np.round(watts, 3)),
        "energy": (ts, 7_300_000_000_000.0 + np.cumsum(np.round(watts * 15_000))),
    }


def test_realistic_gpu_series_compress_well() -> None:
    for name, (ts, vals) in _gpu_series().items():
        assert len(encode(ts, vals)) / len(vals) < {"util": 1.75, "power": 3.1, "energy": 3.6}[name], name


def test_encoding_2_is_smaller_than_encoding_1_where_it_counts() -> None:
    """The split of noise bytes from the residuals (power) and second differences (counters)."""
    series = _gpu_series()
    for name in ("power", "energy"):
        ts, vals = series[name]
        now, before = len(encode(ts, vals)), len(encode(ts, vals, encoding=ENCODING_V1))
        assert now < {"power": 0.95, "energy": 0.8}[name] * before, (name, now, before)
        assert np.array_equal(decode(encode(ts, vals), len(vals), ENCODING)[1], vals)


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


def test_float_chunks_pack_their_xor_planes_once_and_nearly_constant_ones_try_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Varying floats keep the byte planes (packed once, as a Zstandard frame); where the planes
    already take under a byte a sample, or a quarter of the values repeat, whole words are tried
    too and the smaller kept. All round trip exactly."""
    from store import codec_v2, zstd_frames

    rng = np.random.default_rng(4)
    ts = np.arange(75, dtype=np.int64) * 1000
    varying = np.round(rng.uniform(0, 100, 75), 3) * 0.01
    nearly_constant = np.full(75, 0.1) + (np.arange(75) % 3) * 1e-9
    idle_counter = np.cumsum(np.where(rng.random(75) < 0.5, 0.0, rng.gamma(2.0, 1.3, 75)))  # float seconds
    sizes: list[int] = []

    def counting(raw: bytes, level: int) -> bytes:
        packed = zstd_frames.pack(raw, level)
        sizes.append(len(packed))
        return packed

    monkeypatch.setattr(codec_v2, "pack", counting)
    layouts = {}
    for name, vals in (("varying", varying), ("nearly_constant", nearly_constant), ("idle_counter", idle_counter)):
        sizes.clear()
        blob = encode(ts, vals)
        assert blob[1] & 0xC1 == 0x41, name  # mode XOR, values a Zstandard frame
        layouts[name] = (1 + (blob[1] >> 1 & 1), len(sizes))  # flags bit 1: whole words
        assert len(blob) - min(sizes) < 40, name  # the smaller part is the one kept
        assert _same_bits(decode(blob, len(vals))[1], vals), name
    assert layouts["varying"] == (1, 1) and layouts["idle_counter"] == (2, 2)
    assert layouts["nearly_constant"][1] == 2


def test_xor_chunks_written_with_deflate_still_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks from before Zstandard (flag bit 6 clear, raw deflate of the planes or the words)
    decode alone and in a batch with new ones, bit for bit."""
    from store import codec_v2
    from store.batch_decode import decode_many
    from store.codec_parts import deflate

    rng = np.random.default_rng(8)
    ts = np.arange(60, dtype=np.int64) * 15_000
    floats = rng.random(60)
    idle = np.cumsum(np.where(rng.random(60) < 0.9, 0.0, rng.gamma(2.0, 1.3, 60)))
    with monkeypatch.context() as patch:
        patch.setattr(codec_v2, "pack", lambda raw, level: deflate(raw, 6))
        patch.setattr(codec_v2, "XOR_ZSTD", 0)
        old = [encode(ts, floats), encode(ts, idle)]
    new = [encode(ts, floats), encode(ts, idle)]
    assert [b[1] & 0x43 for b in old] == [0x01, 0x03] and [b[1] & 0x43 for b in new] == [0x41, 0x43]
    for blob, vals in zip(old + new, [floats, idle, floats, idle]):
        assert _same_bits(decode(blob, 60)[1], vals)
    got = decode_many(old + new, [60] * 4, [ENCODING] * 4)
    assert _same_bits(got.values, np.concatenate([floats, idle, floats, idle]))


def test_an_integer_chunk_with_the_zstandard_flag_is_refused() -> None:
    from store.batch_decode import decode_many

    blob = encode(np.arange(10, dtype=np.int64), np.arange(10, dtype=np.float64))
    bad = blob[:1] + bytes([blob[1] | 0x40]) + blob[2:]
    with pytest.raises(ChunkDecodeError, match="bad chunk header"):
        decode(bad, 10)
    with pytest.raises(ChunkDecodeError, match="chunk 0: bad chunk header"):
        decode_many([bad], [10], [ENCODING])


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_corrupt_chunks_and_wal_rows_raise_typed_errors(encoding: int) -> None:
    # noisy values: a regular series (zero residuals) codes no bytes per sample, so any count decodes
    noisy = np.random.default_rng(2).integers(0, 1000, 10).astype(np.float64)
    blob = encode(np.arange(10, dtype=np.int64), noisy, encoding=encoding)
    with pytest.raises(ChunkDecodeError):
        decode(b"garbage", 10, encoding)
    with pytest.raises(ChunkDecodeError, match="truncated"):
        decode(blob, 1000, encoding)
    with pytest.raises(ChunkDecodeError, match="unknown chunk encoding 9"):
        decode(blob, 10, 9)
    payload = encode_wal(np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int64), np.ones(3))
    sid, ts, val = decode_wal(payload)
    assert sid.tolist() == [0, 1, 2] and val.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(WalDecodeError):
        decode_wal(payload[:-3])
