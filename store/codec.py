"""Chunk encoding: a block of one series' samples compressed to a couple of bytes each.

Checkpoints write :data:`ENCODING` (:mod:`store.codec_v2`); chunks written earlier in encoding 1
(:mod:`store.codec_v1`) are still read. The ``chunks.encoding`` column (and the cold tier's
column of the same name) says which one a blob is in.

Why this shape: scrape timestamps are near-regular, so deltas-of-deltas are almost all zero;
GPU and inference metrics are mostly integers or short decimals (utilization %, MiB, mW,
token counters), so scaling by 10**decimals and differencing gives small integers. Everything
else (arbitrary floats, NaN, staleness markers) takes the XOR path, which keeps bits exact.
"""

from __future__ import annotations

import numpy as np

from store.codec_parts import ChunkDecodeError
from store.codec_v1 import ENCODING_V1, decode_v1, encode_segments_v1
from store.codec_v2 import ENCODING_V2, decode_v2, encode_segments_v2
from store.types import Float64Array, Int64Array

ENCODING = ENCODING_V2
ENCODINGS = (ENCODING_V1, ENCODING_V2)

__all__ = ["ENCODING", "ENCODINGS", "ChunkDecodeError", "decode", "encode", "encode_segments"]


def encode_segments(
    ts_ms: Int64Array, values: Float64Array, starts: Int64Array, level: int = 6, encoding: int = ENCODING
) -> list[bytes]:
    """Encode many series at once: segment i is ``[starts[i], starts[i+1])`` of the columns."""
    total = len(ts_ms)
    if total == 0 or total != len(values) or len(starts) == 0:
        raise ValueError("encode_segments needs samples, equal-length columns and segments")
    if encoding == ENCODING_V2:
        return encode_segments_v2(ts_ms, values, starts, level)
    if encoding == ENCODING_V1:
        return encode_segments_v1(ts_ms, values, starts, level)
    raise ValueError(f"unknown chunk encoding {encoding}")


def encode(ts_ms: Int64Array, values: Float64Array, level: int = 6, encoding: int = ENCODING) -> bytes:
    """Encode one series' samples (timestamps strictly increasing)."""
    if len(ts_ms) == 0:
        raise ValueError("a chunk needs at least one sample")
    return encode_segments(ts_ms, values, np.zeros(1, dtype=np.int64), level, encoding)[0]


def decode(data: bytes, n: int, encoding: int = ENCODING) -> tuple[Int64Array, Float64Array]:
    """Inverse of :func:`encode`; `n` is the stored sample count, `encoding` the stored encoding."""
    if n < 1:
        raise ChunkDecodeError(f"chunk claims {n} samples")
    if encoding == ENCODING_V2:
        return decode_v2(data, n)
    if encoding == ENCODING_V1:
        return decode_v1(data, n)
    raise ChunkDecodeError(f"unknown chunk encoding {encoding}")
