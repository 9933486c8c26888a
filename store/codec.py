"""Chunk encoding: a block of one series' samples compressed to a few bytes each.

Layout of an encoded chunk (little endian), then zlib-compressed as a whole::

    u8  version (=1)    u8 ts_width    u8 value_mode    u8 value_width    i8 decimals
    i64 first_ts        [ts_width-byte] deltas-of-deltas of the timestamps (n-1 of them;
                                        the first is the first delta itself)
    values: mode INT   -> i64 first scaled integer, then (n-1) deltas at value_width bytes
            mode XOR   -> n u64 words, each the XOR of a value's bits with the previous one

Why this shape: scrape timestamps are near-regular, so deltas-of-deltas are almost all zero;
GPU and inference metrics are mostly integers or short decimals (utilization %, MiB, mW,
token counters), so scaling by 10**decimals and delta-coding gives small integers. Everything
else (arbitrary floats, NaN, staleness markers) takes the XOR path, which keeps bits exact.
Narrowing each column to the smallest integer width before zlib matters more than the zlib
level: it is what gets realistic data under 4 bytes a sample at C speed.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from store.types import Float64Array, Int64Array

ENCODING_V1 = 1
_MODE_INT = 0
_MODE_XOR = 1
_HEADER = struct.Struct("<BBBBbq")
_I64 = struct.Struct("<q")
_MAX_DECIMALS = 6
# Raw deflate with a 4 KiB window: chunks are small, and a smaller window makes each
# compressor and a smaller hash table (memLevel) make each compressor cheaper to set up;
# that set-up, not the compression itself, dominates the cost of small chunks.
_WBITS = -12
_MEM_LEVEL = 4
_EXACT_LIMIT = float(2**52)
_WIDTHS: tuple[tuple[int, type[np.signedinteger]], ...] = (
    (1, np.int8), (2, np.int16), (4, np.int32), (8, np.int64)
)


class ChunkDecodeError(ValueError):
    """A stored chunk does not decode: corruption or an unknown encoding."""


_BOUNDS = tuple((width, dtype, int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) for width, dtype in _WIDTHS)


def _dtype_for(low: int, high: int) -> tuple[int, type[np.signedinteger]]:
    for width, dtype, lowest, highest in _BOUNDS:
        if lowest <= low and high <= highest:
            return width, dtype
    raise AssertionError("int64 always fits")


def _widen(buf: bytes, offset: int, count: int, width: int) -> tuple[Int64Array, int]:
    dtype = dict(_WIDTHS).get(width)
    if dtype is None:
        raise ChunkDecodeError(f"bad integer width {width}")
    end = offset + count * width
    if end > len(buf):
        raise ChunkDecodeError("chunk is truncated")
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset).astype(np.int64), end


def _decimals_per_segment(values: Float64Array, starts: Int64Array) -> Int64Array:
    """Per segment, the smallest k with every value exactly an integer / 10**k; -1 if none."""
    result = np.full(len(starts), -1, dtype=np.int64)
    # Negative zero would come back as +0.0 from the integer path; keep its bits exact.
    finite = np.isfinite(values) & ~((values == 0) & np.signbit(values))
    for decimals in range(_MAX_DECIMALS + 1):
        scale = 10.0**decimals
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = values * scale
            # The decoder divides by the same scale, so that division is the exactness check.
            ok = finite & (np.abs(scaled) < _EXACT_LIMIT) & (np.round(scaled) / scale == values)
        seg_ok = np.logical_and.reduceat(ok, starts)
        result[(result < 0) & seg_ok] = decimals
        if np.all(result >= 0):
            break
    return result


def encode_segments(
    ts_ms: Int64Array, values: Float64Array, starts: Int64Array, level: int = 6
) -> list[bytes]:
    """Encode many series at once: segment i is ``[starts[i], starts[i+1])`` of the columns.

    The column arithmetic runs vectorised over every segment together, so the per-chunk
    Python work left is slicing and one zlib call; a checkpoint encodes thousands of chunks.
    """
    total = len(ts_ms)
    if total == 0 or total != len(values) or len(starts) == 0:
        raise ValueError("encode_segments needs samples, equal-length columns and segments")
    ts = np.asarray(ts_ms, dtype=np.int64)
    vals = np.asarray(values, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.append(starts[1:], total)
    is_start = np.zeros(total, dtype=bool)
    is_start[starts] = True

    # Timestamps: delta-of-delta, zero at segment starts (those carry the raw first_ts).
    delta = np.zeros(total, dtype=np.int64)
    delta[1:] = ts[1:] - ts[:-1]
    delta[is_start] = 0
    dod = delta.copy()
    dod[1:] -= delta[:-1]
    second = starts + 1
    second = second[second < ends]
    dod[second] = delta[second]
    dod[is_start] = 0
    ts_low = np.minimum.reduceat(dod, starts)
    ts_high = np.maximum.reduceat(dod, starts)

    decimals = _decimals_per_segment(vals, starts)
    lengths = ends - starts
    sample_decimals = np.repeat(np.maximum(decimals, 0), lengths)
    with np.errstate(invalid="ignore", over="ignore"):
        ints = np.round(vals * (10.0**sample_decimals))
    int_mode = np.repeat(decimals >= 0, lengths)
    ints = np.where(int_mode, ints, 0).astype(np.int64)
    int_delta = np.zeros(total, dtype=np.int64)
    int_delta[1:] = ints[1:] - ints[:-1]
    int_delta[is_start] = 0
    val_low = np.minimum.reduceat(int_delta, starts)
    val_high = np.maximum.reduceat(int_delta, starts)
    bits = vals.view(np.uint64)
    xored = bits.copy()
    xored[1:] ^= bits[:-1]
    xored[is_start] = bits[is_start]

    # Plain Python scalars for the per-chunk loop: numpy scalar access costs ~10x more.
    bounds = zip(
        starts.tolist(), ends.tolist(), ts_low.tolist(), ts_high.tolist(),
        decimals.tolist(), val_low.tolist(), val_high.tolist(), ts[starts].tolist(),
        ints[starts].tolist(),
    )
    out: list[bytes] = []
    for s, e, t_low, t_high, k, v_low, v_high, first_ts, first_int in bounds:
        ts_width, ts_dtype = _dtype_for(t_low, t_high)
        ts_bytes = dod[s + 1 : e].astype(ts_dtype).tobytes()
        if k >= 0:
            value_width, value_dtype = _dtype_for(v_low, v_high)
            value_bytes = _I64.pack(first_int) + int_delta[s + 1 : e].astype(value_dtype).tobytes()
            mode = _MODE_INT
        else:
            value_width, k, mode = 8, 0, _MODE_XOR
            value_bytes = xored[s:e].tobytes()
        header = _HEADER.pack(ENCODING_V1, ts_width, mode, value_width, k, first_ts)
        compressor = zlib.compressobj(level, zlib.DEFLATED, _WBITS, _MEM_LEVEL)
        out.append(compressor.compress(header + ts_bytes + value_bytes) + compressor.flush())
    return out


def encode(ts_ms: Int64Array, values: Float64Array, level: int = 6) -> bytes:
    """Encode one series' samples (timestamps strictly increasing)."""
    if len(ts_ms) == 0:
        raise ValueError("a chunk needs at least one sample")
    return encode_segments(ts_ms, values, np.zeros(1, dtype=np.int64), level)[0]


def decode(data: bytes, n: int) -> tuple[Int64Array, Float64Array]:
    """Inverse of :func:`encode`; `n` is the stored sample count."""
    try:
        raw = zlib.decompress(data, _WBITS)
    except zlib.error as exc:
        raise ChunkDecodeError(f"chunk does not decompress: {exc}") from exc
    if len(raw) < _HEADER.size:
        raise ChunkDecodeError("chunk header is truncated")
    version, ts_width, mode, value_width, decimals, first_ts = _HEADER.unpack_from(raw, 0)
    if version != ENCODING_V1:
        raise ChunkDecodeError(f"unknown chunk version {version}")
    dod, offset = _widen(raw, _HEADER.size, n - 1, ts_width)
    ts = np.empty(n, dtype=np.int64)
    ts[0] = first_ts
    if n > 1:
        ts[1:] = first_ts + np.add.accumulate(np.add.accumulate(dod))
    if mode == _MODE_INT:
        if offset + 8 > len(raw):
            raise ChunkDecodeError("chunk is truncated")
        (first,) = _I64.unpack_from(raw, offset)
        deltas, offset = _widen(raw, offset + 8, n - 1, value_width)
        ints = np.empty(n, dtype=np.int64)
        ints[0] = first
        ints[1:] = first + np.add.accumulate(deltas)
        values = ints.astype(np.float64) / (10.0**decimals)
    elif mode == _MODE_XOR:
        end = offset + 8 * n
        if end > len(raw):
            raise ChunkDecodeError("chunk is truncated")
        words = np.frombuffer(raw, dtype=np.uint64, count=n, offset=offset)
        values = np.bitwise_xor.accumulate(words).view(np.float64)
    else:
        raise ChunkDecodeError(f"unknown value mode {mode}")
    return ts, values
