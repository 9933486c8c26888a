"""Decoding many chunks at once gives, bit for bit, what decoding them one by one gives, in
either encoding and with both mixed in one batch, and a bad chunk is named by its position."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from store.batch_decode import decode_many
from store.codec import ENCODINGS, ChunkDecodeError, decode, encode, encode_segments
from store.codec_v1 import ENCODING_V1
from store.codec_v2 import ENCODING_V2, HEAD, MODE_INT, MODE_XOR, XOR_ZSTD, flags_of
from store.residual_streams import DEFLATED, RAW, ZERO
from store.types import STALE_NAN
from store.varint import decode_varint, encode_varints

_chunk = st.tuples(
    st.one_of(  # time gaps: any width, or regular (no bytes at all in encoding 2)
        st.lists(st.integers(min_value=1, max_value=2**33), min_size=1, max_size=120),
        st.tuples(st.integers(min_value=1, max_value=2**33), st.integers(min_value=1, max_value=120)).map(
            lambda gap: [gap[0]] * gap[1]),
    ),
    st.one_of(
        st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=120),
        st.lists(st.integers(min_value=-(2**40), max_value=2**40).map(float), min_size=1, max_size=120),
        st.lists(st.decimals(min_value=-1000, max_value=1000, places=2, allow_nan=False).map(float), min_size=1, max_size=120),
        # counters: increments that drift, with resets
        st.lists(st.integers(min_value=0, max_value=2**20), min_size=1, max_size=120).map(
            lambda steps: np.cumsum(np.asarray(steps, np.float64)).tolist()),
        # a gauge that rarely moves (a deflated unary stream in encoding 2)
        st.tuples(st.integers(min_value=0, max_value=5), st.integers(min_value=1, max_value=120)).map(
            lambda run: [float(run[0])] * run[1] + [float(run[0] + 1)] * 3),
    ),
    st.integers(min_value=0, max_value=2**44),
    st.sampled_from(ENCODINGS),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_chunk, min_size=1, max_size=12))
def test_many_chunks_decode_as_each_alone(chunks: list[tuple[list[int], list[float], int, int]]) -> None:
    datas, counts, encodings, expected = [], [], [], []
    for gaps, values, start, encoding in chunks:
        n = min(len(gaps), len(values))
        ts = start + np.cumsum(np.asarray(gaps[:n], np.int64))
        vals = np.asarray(values[:n], np.float64)
        datas.append(encode(ts, vals, encoding=encoding))
        counts.append(n)
        encodings.append(encoding)
        expected.append(decode(datas[-1], n, encoding))
        assert np.array_equal(expected[-1][1].view(np.uint64), vals.view(np.uint64))
    got = decode_many(datas, counts, encodings)
    assert got.counts.tolist() == counts
    for c, (ts, vals) in enumerate(expected):
        a, n = int(got.starts[c]), counts[c]
        assert np.array_equal(got.ts[a : a + n], ts)
        assert np.array_equal(got.values[a : a + n].view(np.uint64), vals.view(np.uint64))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_markers_negative_zero_and_single_samples_survive(encoding: int) -> None:
    cases = [
        (np.asarray([5], np.int64), np.asarray([-0.0])),
        (np.asarray([1, 2, 4], np.int64), np.asarray([1.0, STALE_NAN, 3.0])),
        (np.asarray([10, 20], np.int64), np.asarray([2.5, 2.75])),
        (np.asarray([1, 2, 3, 4], np.int64), np.asarray([10.0, 20.0, 31.0, 5.0])),  # a counter reset
    ]
    blobs = [encode(t, v, encoding=encoding) for t, v in cases]
    got = decode_many(blobs, [len(t) for t, _ in cases], [encoding] * len(cases))
    assert np.array_equal(got.values.view(np.uint64), np.concatenate([v for _, v in cases]).view(np.uint64))
    assert got.ts.tolist() == [5, 1, 2, 4, 10, 20, 1, 2, 3, 4]


def test_an_empty_batch_is_empty() -> None:
    got = decode_many([], [], [])
    assert len(got.ts) == 0 and len(got.counts) == 0


def test_an_unknown_encoding_is_named() -> None:
    blob = encode(np.arange(3, dtype=np.int64), np.ones(3))
    with pytest.raises(ChunkDecodeError, match="chunk 1: unknown chunk encoding 7"):
        decode_many([blob, blob], [3, 3], [ENCODING_V2, 7])


N = 400


def _ts() -> np.ndarray:
    return 1_000 + np.arange(N, dtype=np.int64) * 15_000


@pytest.mark.parametrize("spoil, words", [
    (lambda good: b"not deflate at all", "chunk 1 does not decompress"),
    (lambda good: _recompress(_raw(good)[:20]), "chunk 1: chunk is truncated"),
    (lambda good: _recompress(bytes([9]) + _raw(good)[1:]), "chunk 1: unknown chunk version"),
    (lambda good: _recompress(_raw(good)[:1] + bytes([3]) + _raw(good)[2:]), "chunk 1: bad integer width"),
    (lambda good: _recompress(_raw(good)[:5]), "chunk 1: header is truncated"),
])
def test_a_bad_encoding_1_chunk_is_named_by_its_position(spoil: object, words: str) -> None:
    good = encode(_ts(), np.arange(N, dtype=np.float64), encoding=ENCODING_V1)
    with pytest.raises(ChunkDecodeError, match=words):
        decode_many([good, spoil(good), good], [N] * 3, [ENCODING_V1] * 3)  # type: ignore[operator]


def _power() -> np.ndarray:
    return np.round(300 + np.cumsum(np.random.default_rng(5).normal(0, 4, N)), 3)


def _floats() -> np.ndarray:
    return np.random.default_rng(5).random(N)  # the XOR mode: deflated byte planes


def _idle() -> np.ndarray:
    return np.repeat([3.0, 4.0], N // 2)  # one step: a zero-k unary stream, deflated


def _bursty() -> np.ndarray:
    """A request counter of a bursty service: flat while idle, jumping while busy."""
    rng = np.random.default_rng(6)
    return np.cumsum(np.where(rng.random(N) < 0.6, 0, rng.integers(1, 5000, N))).astype(np.float64)


def _idle_seconds() -> np.ndarray:
    """A float seconds counter that is flat for long stretches (XOR words deflate best)."""
    rng = np.random.default_rng(7)
    return np.cumsum(np.where(rng.random(N) < 0.9, 0.0, rng.gamma(2.0, 1.3, N)))


def _sparse_at(blob: bytes) -> int:
    """Where an INT chunk's value stream begins, with regular timestamps (no timestamp bytes)."""
    at = HEAD.size
    for _ in range(4 + (blob[1] >> 1 & 1)):
        _, at = decode_varint(blob, at)
    return at


def _planes_at(blob: bytes) -> int:
    """Where an XOR chunk's deflated planes begin (its last varint field is their size)."""
    at = HEAD.size
    for _ in range(3):
        size, at = decode_varint(blob, at)
    return len(blob) - size


@pytest.mark.parametrize("values, spoil, words", [
    (_power, lambda good: good[:5], "chunk 1: header is truncated"),
    (_power, lambda good: good[:HEAD.size + 1], "chunk 1: header is truncated"),
    (_power, lambda good: bytes([9]) + good[1:], "chunk 1: unknown chunk version"),
    (_power, lambda good: good[:1] + bytes([good[1] | 0xC0]) + good[2:], "chunk 1: bad chunk header"),
    (_power, lambda good: good[:-12], "chunk 1: chunk is truncated"),
    (_power, lambda good: good + b"\x00\x01", "chunk 1: chunk has bytes past its samples"),
    (_floats, lambda good: good[:_planes_at(good)] + b"\x07" + good[_planes_at(good) + 1 :], "chunk 1 does not decompress"),
    (_floats, lambda good: good[:-3], "chunk 1"),
    (_idle, lambda good: good[:-3] + b"\xff\xff\xff", "chunk 1"),
    (_bursty, lambda good: good[:-40], "chunk 1: chunk is truncated"),
    (_bursty, lambda good: good[:_sparse_at(good)] + b"\x02\x07\x00" + good[_sparse_at(good) + 3 :], "chunk 1"),
])
def test_a_bad_encoding_2_chunk_is_named_by_its_position(values: object, spoil: object, words: str) -> None:
    good = encode(_ts(), values())  # type: ignore[operator]
    assert np.array_equal(decode(good, N)[1], values())  # type: ignore[operator]
    bad = spoil(good)  # type: ignore[operator]
    with pytest.raises(ChunkDecodeError, match=words):
        decode_many([good, bad, good], [N] * 3, [ENCODING_V2] * 3)
    with pytest.raises(ChunkDecodeError):
        decode(bad, N)


def test_encoding_2_uses_each_form_and_all_decode_in_one_batch() -> None:
    """The chunks above exercise what they claim: Rice with raw unary, XOR planes and XOR words,
    deflated unary, SPARSE; and a batch of all of them decodes as each alone."""
    makers = {"power": _power, "floats": _floats, "idle": _idle, "bursty": _bursty, "idle_seconds": _idle_seconds}
    blobs = {name: encode(_ts(), make()) for name, make in makers.items()}
    flags = {name: blob[1] for name, blob in blobs.items()}
    assert flags["power"] & 1 == 0 and flags["power"] >> 4 & 3 == 0  # INT, raw unary
    assert flags["floats"] & 3 == 1  # XOR, planes
    assert flags["idle_seconds"] & 3 == 3  # XOR, whole words
    assert flags["idle"] >> 4 & 3 == 1 and flags["idle"] >> 2 & 3 == 2  # deflated unary; regular timestamps: zero
    assert flags["bursty"] >> 4 & 3 == 3  # SPARSE
    got = decode_many(list(blobs.values()), [N] * len(blobs), [ENCODING_V2] * len(blobs))
    want = np.concatenate([make() for make in makers.values()])
    assert np.array_equal(got.values.view(np.uint64), want.view(np.uint64))
    assert np.array_equal(got.ts, np.tile(_ts(), len(blobs)))


def test_chunks_encoded_together_are_byte_for_byte_each_encoded_alone() -> None:
    """Encoding many segments lays out their heads and streams at once: no segment's bytes,
    form or Rice parameter leak into another's (every form, both orders and mode XOR side by
    side, with jittered and regular timestamps and single samples among them)."""
    rng = np.random.default_rng(5)
    counter = np.cumsum(rng.integers(900, 1100, N)).astype(np.float64)  # order 2
    jittered = _ts() + rng.integers(-3, 4, N)
    segments = [(_ts(), make()) for make in (_power, _floats, _idle, _bursty, _idle_seconds)]
    segments += [(jittered, counter), (jittered[:1], counter[:1]), (jittered[:2], _floats()[:2]), (_ts(), _power())]
    ts = np.concatenate([t for t, _ in segments])
    vals = np.concatenate([v for _, v in segments])
    starts = np.cumsum([0] + [len(t) for t, _ in segments[:-1]])
    together = encode_segments(ts, vals, starts)
    assert together == [encode(t, v) for t, v in segments]
    assert {blob[1] >> 4 & 3 for blob in together} >= {RAW, DEFLATED, 3} and {blob[1] & 3 for blob in together} >= {1, 2, 3}


def _raw(data: bytes) -> bytes:
    return zlib.decompress(data, -12)


def _recompress(raw: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -12)
    return c.compress(raw) + c.flush()


def _with_header_field(blob: bytes, index: int, value: int) -> bytes:
    at, fields = HEAD.size, []
    for _ in range(4 + (blob[1] >> 1 & 1)):
        field, at = decode_varint(blob, at)
        fields.append(field)
    fields[index] = value
    return blob[: HEAD.size] + encode_varints(fields) + blob[at:]


def _jittered() -> np.ndarray:
    return _ts() + np.arange(N) % 3  # a RAW timestamp stream


@pytest.mark.parametrize("size", [2**64 - 1, 2**63 - 1, 2**63, 10**9])
def test_a_declared_size_far_past_the_chunk_is_refused_by_both_decoders(size: int) -> None:
    """Sizes are compared while unsigned: 2**63 and above must not wrap to a negative int64."""
    bad = _with_header_field(encode(_jittered(), _power()), 1, size)
    with pytest.raises(ChunkDecodeError, match="truncated"):
        decode(bad, N)
    with pytest.raises(ChunkDecodeError, match="chunk 0: chunk is truncated"):
        decode_many([bad], [N], [ENCODING_V2])


def test_a_huge_bitmap_length_is_refused_by_both_decoders() -> None:
    good = encode(_ts(), _bursty())
    at = _sparse_at(good)
    _, after = decode_varint(good, at)
    bad = good[:at] + encode_varints([2**63 - 1]) + good[after:]
    for attempt in (lambda: decode(bad, N), lambda: decode_many([bad], [N], [ENCODING_V2])):
        with pytest.raises(ChunkDecodeError):
            attempt()


@pytest.mark.parametrize("decimals", [-5, 7, 23])
def test_decimals_out_of_range_are_refused_not_decoded_differently(decimals: int) -> None:
    bad = bytearray(encode(np.arange(3, dtype=np.int64), np.asarray([1.0, 2.0, 3.0])))
    bad[4] = decimals & 0xFF
    for attempt in (lambda: decode(bytes(bad), 3), lambda: decode_many([bytes(bad)], [3], [ENCODING_V2])):
        with pytest.raises(ChunkDecodeError, match="bad chunk header"):
            attempt()


def test_a_deflated_part_that_would_inflate_past_its_samples_is_refused_early() -> None:
    """A few KB of corrupt chunk must not inflate to megabytes (and their bits to more) first."""
    unary = zlib.compressobj(9, zlib.DEFLATED, -12)
    bomb_part = unary.compress(b"\xff" * (4 << 20)) + unary.flush()
    bomb = HEAD.pack(ENCODING_V2, flags_of(MODE_INT, 1, DEFLATED, ZERO), 0, 0, 0, 0) + encode_varints(
        [0, len(bomb_part), 0, 0]) + bomb_part
    assert len(bomb) < 8_000
    for attempt in (lambda: decode(bomb, 10), lambda: decode_many([bomb], [10], [ENCODING_V2])):
        with pytest.raises(ChunkDecodeError, match="inflates past the 25 bytes"):
            attempt()


def test_an_xor_frame_that_claims_more_than_its_samples_is_refused_unread() -> None:
    """A Zstandard frame says its size: one larger than the chunk's 8 bytes a sample, or one
    that does not say, is refused before it is inflated."""
    bomb_part = zstandard.ZstdCompressor(level=19).compress(bytes(64 << 20))
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(80))
    for part, words in ((bomb_part, "inflates past the 80 bytes"), (unsized, "does not say its size")):
        chunk = HEAD.pack(ENCODING_V2, flags_of(MODE_XOR, 1, ZERO, RAW) | XOR_ZSTD, 0, 0, 0, 0) + encode_varints(
            [0, 0, len(part)]) + part
        with pytest.raises(ChunkDecodeError, match=words):
            decode(chunk, 10)
        with pytest.raises(ChunkDecodeError, match=words):
            decode_many([chunk], [10], [ENCODING_V2])
