"""Chunk encoding 1 (the chunks written before encoding 2): still read, no longer written.

Layout of an encoded chunk (little endian), then raw-deflated as a whole::

    u8  version (=1)    u8 ts_width    u8 value_mode    u8 value_width    i8 decimals
    i64 first_ts        [ts_width-byte] deltas-of-deltas of the timestamps (n-1 of them;
                                        the first is the first delta itself)
    values: mode INT   -> i64 first scaled integer, then (n-1) deltas at value_width bytes
            mode XOR   -> n u64 words, each the XOR of a value's bits with the previous one
"""

from __future__ import annotations

import struct

import numpy as np

from store.codec_parts import (
    ChunkDecodeError,
    decimals_per_segment,
    deflate,
    inflate,
    segment_ends,
    timestamp_dods,
)
from store.types import Float64Array, Int64Array

ENCODING_V1 = 1
MODE_INT = 0
MODE_XOR = 1
HEADER = struct.Struct("<BBBBbq")
_I64 = struct.Struct("<q")

SIGNED_WIDTHS: tuple[tuple[int, type[np.signedinteger]], ...] = (
    (1, np.int8), (2, np.int16), (4, np.int32), (8, np.int64)
)
_BOUNDS = tuple((width, dtype, int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) for width, dtype in SIGNED_WIDTHS)


def signed_dtype_for(low: int, high: int) -> tuple[int, type[np.signedinteger]]:
    """The narrowest signed integer type holding every value in [low, high]."""
    for width, dtype, lowest, highest in _BOUNDS:
        if lowest <= low and high <= highest:
            return width, dtype
    raise AssertionError("int64 always fits")


def widen(buf: bytes, offset: int, count: int, width: int) -> tuple[Int64Array, int]:
    """``count`` little-endian signed integers of ``width`` bytes at ``offset``, as int64."""
    dtype = dict(SIGNED_WIDTHS).get(width)
    if dtype is None:
        raise ChunkDecodeError(f"bad integer width {width}")
    end = offset + count * width
    if end > len(buf):
        raise ChunkDecodeError("chunk is truncated")
    return np.frombuffer(buf, dtype=np.dtype(dtype).newbyteorder("<"), count=count, offset=offset).astype(np.int64), end


def encode_segments_v1(ts_ms: Int64Array, values: Float64Array, starts: Int64Array, level: int = 6) -> list[bytes]:
    """Encode segment i = ``[starts[i], starts[i+1])`` of the columns as an encoding-1 chunk."""
    total = len(ts_ms)
    ts = np.asarray(ts_ms, dtype=np.int64)
    vals = np.asarray(values, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.int64)
    ends = segment_ends(starts, total)
    is_start = np.zeros(total, dtype=bool)
    is_start[starts] = True
    dod = timestamp_dods(ts, starts)
    ts_low = np.minimum.reduceat(dod, starts)
    ts_high = np.maximum.reduceat(dod, starts)
    decimals = decimals_per_segment(vals, starts)
    lengths = ends - starts
    with np.errstate(invalid="ignore", over="ignore"):
        ints = np.round(vals * (10.0 ** np.repeat(np.maximum(decimals, 0), lengths)))
    ints = np.where(np.repeat(decimals >= 0, lengths), ints, 0).astype(np.int64)
    int_delta = np.zeros(total, dtype=np.int64)
    int_delta[1:] = ints[1:] - ints[:-1]
    int_delta[is_start] = 0
    val_low = np.minimum.reduceat(int_delta, starts)
    val_high = np.maximum.reduceat(int_delta, starts)
    bits = vals.view(np.uint64)
    xored = bits.copy()
    xored[1:] ^= bits[:-1]
    xored[is_start] = bits[is_start]
    bounds = zip(starts.tolist(), ends.tolist(), ts_low.tolist(), ts_high.tolist(), decimals.tolist(),
                 val_low.tolist(), val_high.tolist(), ts[starts].tolist(), ints[starts].tolist())
    out: list[bytes] = []
    for s, e, t_low, t_high, k, v_low, v_high, first_ts, first_int in bounds:
        ts_width, ts_dtype = signed_dtype_for(t_low, t_high)
        ts_bytes = dod[s + 1 : e].astype(ts_dtype).tobytes()
        if k >= 0:
            value_width, value_dtype = signed_dtype_for(v_low, v_high)
            value_bytes = _I64.pack(first_int) + int_delta[s + 1 : e].astype(value_dtype).tobytes()
            mode = MODE_INT
        else:
            value_width, k, mode = 8, 0, MODE_XOR
            value_bytes = xored[s:e].tobytes()
        header = HEADER.pack(ENCODING_V1, ts_width, mode, value_width, k, first_ts)
        out.append(deflate(header + ts_bytes + value_bytes, level))
    return out


def decode_v1(data: bytes, n: int) -> tuple[Int64Array, Float64Array]:
    raw = inflate(data, limit=HEADER.size + 8 + 16 * n)
    if len(raw) < HEADER.size:
        raise ChunkDecodeError("chunk header is truncated")
    version, ts_width, mode, value_width, decimals, first_ts = HEADER.unpack_from(raw, 0)
    if version != ENCODING_V1:
        raise ChunkDecodeError(f"unknown chunk version {version}")
    dod, offset = widen(raw, HEADER.size, n - 1, ts_width)
    ts = np.empty(n, dtype=np.int64)
    ts[0] = first_ts
    if n > 1:
        ts[1:] = first_ts + np.add.accumulate(np.add.accumulate(dod))
    if mode == MODE_INT:
        if offset + 8 > len(raw):
            raise ChunkDecodeError("chunk is truncated")
        (first,) = _I64.unpack_from(raw, offset)
        deltas, offset = widen(raw, offset + 8, n - 1, value_width)
        ints = np.empty(n, dtype=np.int64)
        ints[0] = first
        ints[1:] = first + np.add.accumulate(deltas)
        values = ints.astype(np.float64) / (10.0**decimals)
    elif mode == MODE_XOR:
        end = offset + 8 * n
        if end > len(raw):
            raise ChunkDecodeError("chunk is truncated")
        words = np.frombuffer(raw, dtype="<u8", count=n, offset=offset)
        values = np.bitwise_xor.accumulate(words).view(np.float64)
    else:
        raise ChunkDecodeError(f"unknown value mode {mode}")
    return ts, values
