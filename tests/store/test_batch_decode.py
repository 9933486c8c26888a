"""Decoding many chunks at once gives, bit for bit, what decoding them one by one gives, and a
bad chunk is named by its position."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.batch_decode import decode_many
from store.codec import ChunkDecodeError, decode, encode
from store.types import STALE_NAN

_chunk = st.tuples(
    st.lists(st.integers(min_value=1, max_value=2**33), min_size=1, max_size=120),  # time gaps, any width
    st.one_of(
        st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=120),
        st.lists(st.integers(min_value=-(2**40), max_value=2**40).map(float), min_size=1, max_size=120),
        st.lists(st.decimals(min_value=-1000, max_value=1000, places=2, allow_nan=False).map(float), min_size=1, max_size=120),
    ),
    st.integers(min_value=0, max_value=2**44),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_chunk, min_size=1, max_size=12))
def test_many_chunks_decode_as_each_alone(chunks: list[tuple[list[int], list[float], int]]) -> None:
    datas, counts, expected = [], [], []
    for gaps, values, start in chunks:
        n = min(len(gaps), len(values))
        ts = start + np.cumsum(np.asarray(gaps[:n], np.int64))
        vals = np.asarray(values[:n], np.float64)
        datas.append(encode(ts, vals))
        counts.append(n)
        expected.append(decode(datas[-1], n))
    got = decode_many(datas, counts)
    assert got.counts.tolist() == counts
    for c, (ts, vals) in enumerate(expected):
        a, n = int(got.starts[c]), counts[c]
        assert np.array_equal(got.ts[a : a + n], ts)
        assert np.array_equal(got.values[a : a + n].view(np.uint64), vals.view(np.uint64))


def test_markers_negative_zero_and_single_samples_survive() -> None:
    cases = [
        (np.asarray([5], np.int64), np.asarray([-0.0])),
        (np.asarray([1, 2, 4], np.int64), np.asarray([1.0, STALE_NAN, 3.0])),
        (np.asarray([10, 20], np.int64), np.asarray([2.5, 2.75])),
    ]
    got = decode_many([encode(t, v) for t, v in cases], [len(t) for t, _ in cases])
    assert np.array_equal(got.values.view(np.uint64), np.concatenate([v for _, v in cases]).view(np.uint64))
    assert got.ts.tolist() == [5, 1, 2, 4, 10, 20]


def test_an_empty_batch_is_empty() -> None:
    got = decode_many([], [])
    assert len(got.ts) == 0 and len(got.counts) == 0


@pytest.mark.parametrize("spoil, words", [
    (lambda good: b"not deflate at all", "chunk 1 does not decompress"),
    (lambda good: _recompress(_raw(good)[:20]), "chunk 1: chunk is truncated"),
    (lambda good: _recompress(bytes([9]) + _raw(good)[1:]), "chunk 1: unknown chunk version"),
    (lambda good: _recompress(_raw(good)[:1] + bytes([3]) + _raw(good)[2:]), "chunk 1: bad integer width"),
    (lambda good: _recompress(_raw(good)[:5]), "chunk 1: header is truncated"),
])
def test_a_bad_chunk_is_named_by_its_position(spoil: object, words: str) -> None:
    ts = 1_000 + np.arange(50, dtype=np.int64) * 15_000
    good = encode(ts, np.arange(50, dtype=np.float64))
    with pytest.raises(ChunkDecodeError, match=words):
        decode_many([good, spoil(good), good], [50, 50, 50])  # type: ignore[operator]


def _raw(data: bytes) -> bytes:
    return zlib.decompress(data, -12)


def _recompress(raw: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -12)
    return c.compress(raw) + c.flush()
