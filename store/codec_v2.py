"""Chunk encoding 2: what a checkpoint writes.

Layout (little endian)::

    u8 version (=2)   u8 flags   u8 ts_k   u8 value_k   i8 decimals   i64 first_ts
    varints           zigzag(first timestamp delta), ts_size, value_size,
                      mode INT: zigzag(first scaled integer); order 2: zigzag(first difference)
    timestamps        the timestamps' residual stream
    values            mode INT: the values' residual stream
                      mode XOR: value_size bytes, 8 byte planes (plane p holds byte p of every
                      value's bits XOR the previous value's) packed as one Zstandard frame (flag
                      bit 6; chunks written before it deflated them, raw, and have bit 6 clear)

``flags``: bit 0 the mode (0 INT, 1 XOR), bit 1 set for order 2 (mode XOR: set when the
packed words are whole 8-byte words, not planes; whichever packs smaller), bits 2-3 the timestamps'
stream form and bits 4-5 the values' (:mod:`store.residual_streams`: RAW, DEFLATED, ZERO,
SPARSE), bit 6 (mode XOR) the values' frame is Zstandard (:mod:`store.zstd_frames`: eight times
faster than deflate on such bytes, and no larger); ts_size and value_size are the sizes those
forms name.

Timestamps are coded as the zigzag of their second differences from the third sample on
(regular scrapes: all zero, so no bytes). Mode INT (values that are integers once scaled by
10**decimals) codes the zigzag of the order-th difference of the scaled integers; order 2 is
for counters, whose increments change slowly. Both residual streams are Golomb-Rice coded
(:mod:`store.rice`), one parameter per stream, in whichever form is smallest. On the mixed
benchmark fleet this is 1.52 bytes a sample where deflating narrowed integers (encoding 1)
took 2.03; the fleet's entropy is ~1.5. Series derived from real request traces (bursty
counters, a running-requests gauge, 15 s scrapes; ``benchmarks/store_trace_series.py``): 2.28
against 2.79 with regular timestamps, 2.84 against 3.84 with ±3 ms of jitter.
"""

from __future__ import annotations

import struct
from typing import Any, overload

import numpy as np

from store.codec_parts import (
    MAX_DECIMALS,
    ChunkDecodeError,
    decimals_per_segment,
    inflate,
    segment_ends,
    timestamp_dods,
)
from store.residual_streams import RAW, code_streams, read_stream
from store.rice import bit_lengths, run_int_sums
from store.types import Float64Array, Int64Array
from store.varint import VarintError, decode_varint, encode_varint_rows, unzigzag_int
from store.zstd_frames import FrameError, pack, unpack

ENCODING_V2 = 2
MODE_INT, MODE_XOR = 0, 1
XOR_ZSTD = 1 << 6  # flags: mode XOR's values are a Zstandard frame, not raw deflate
XOR_ZSTD_LEVEL = 1  # on varying floats the smallest and the fastest of levels 1-19
HEAD = struct.Struct("<BBBBbq")
HEAD_DTYPE = np.dtype([("version", "u1"), ("flags", "u1"), ("ts_k", "u1"), ("value_k", "u1"), ("decimals", "i1"),
                       ("first_ts", "<i8")])  # HEAD, for many chunks at once


def zigzag(d: Int64Array) -> np.ndarray:
    """Signed to unsigned, small magnitudes to small numbers: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    return ((d << 1) ^ (d >> 63)).view(np.uint64)


def unzigzag(z: np.ndarray) -> Int64Array:
    z = z.astype(np.uint64)
    out: Int64Array = (z >> np.uint64(1)).view(np.int64) ^ -(z & np.uint64(1)).view(np.int64)
    return out


@overload
def flags_of(mode: int, order: int, ts_form: int, value_form: int) -> int: ...
@overload
def flags_of(mode: int, order: Int64Array, ts_form: Int64Array | int, value_form: Int64Array | int) -> Int64Array: ...
def flags_of(mode: int, order: Any, ts_form: Any, value_form: Any) -> Any:
    """A chunk's flags byte; from arrays, every chunk's at once."""
    return mode | (order - 1) << 1 | ts_form << 2 | value_form << 4


def planes_to_words(planes: np.ndarray) -> np.ndarray:
    """``(8, r)`` byte planes back to r little-endian 64-bit words."""
    return np.ascontiguousarray(planes.T).view("<u8").ravel()


def encode_segments_v2(ts_ms: Int64Array, values: Float64Array, starts: Int64Array, level: int = 6) -> list[bytes]:
    """Encode segment i = ``[starts[i], starts[i+1])`` of the columns as an encoding-2 chunk.
    Every column operation runs over all segments at once; the loop only assembles bytes.
    ``level`` is encoding 1's deflate level: this encoding's packers have their own."""
    total = len(ts_ms)
    ts = np.asarray(ts_ms, dtype=np.int64)
    vals = np.asarray(values, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.int64)
    lengths = segment_ends(starts, total) - starts
    at = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)  # position in its segment
    dod = timestamp_dods(ts, starts)
    ts_delta = np.where(lengths >= 2, dod[np.minimum(starts + 1, total - 1)], 0)
    ts_res, ts_counts = zigzag(dod[at >= 2]), np.maximum(lengths - 2, 0)

    decimals = decimals_per_segment(vals, starts)
    is_int = decimals >= 0
    with np.errstate(invalid="ignore", over="ignore"):
        ints = np.round(vals * (10.0 ** np.repeat(np.maximum(decimals, 0), lengths)))
    ints = np.where(np.repeat(is_int, lengths), ints, 0).astype(np.int64)
    d1 = np.zeros(total, np.int64)
    d1[1:] = ints[1:] - ints[:-1]
    d1[at == 0] = 0
    d2 = np.zeros(total, np.int64)
    d2[1:] = d1[1:] - d1[:-1]
    d2[at < 2] = 0
    z1, z2 = zigzag(d1), zigzag(d2)
    # bits, roughly: what a Rice code of each order would cost
    bits1, bits2 = bit_lengths(z1), bit_lengths(z2)
    order = np.where(is_int & (lengths >= 3) & (run_int_sums(bits2, lengths) < run_int_sums(bits1, lengths)), 2, 1)
    per_order = np.repeat(order, lengths)
    second = per_order == 2
    kept = (at >= per_order) & np.repeat(is_int, lengths)
    val_res = np.where(second, z2, z1)[kept]
    val_counts = np.where(is_int, lengths - order, 0)

    ts_streams = code_streams(ts_res, ts_counts)
    val_streams = code_streams(val_res, val_counts, np.where(second, bits2, bits1)[kept])
    xor_bytes = _xor_rows(vals, at) if not is_int.all() else np.empty((0, 8), np.uint8)
    # Per sample up to it, how many values repeated the one before (an all-zero XOR row).
    repeats = np.concatenate([[0], np.cumsum(~xor_bytes.any(axis=1))])

    # Mode XOR's values are packed chunk by chunk (one Zstandard frame each); everything else
    # of a chunk -- its fixed head and varints -- is laid out for all chunks at once.
    n = len(starts)
    layouts, val_sizes, val_parts = np.zeros(n, np.int64), val_streams.sizes.copy(), val_streams.parts
    xor_chunks = np.flatnonzero(~is_int)
    xor_starts = starts[xor_chunks]
    for i, s, e in zip(xor_chunks.tolist(), xor_starts.tolist(), (xor_starts + lengths[xor_chunks]).tolist()):
        layouts[i], val_parts[i] = _xor_part(xor_bytes[s:e], int(repeats[e] - repeats[s]))
        val_sizes[i] = len(val_parts[i])
    head = np.zeros(n, HEAD_DTYPE)
    head["version"] = ENCODING_V2
    head["flags"] = np.where(is_int, flags_of(MODE_INT, order, ts_streams.forms, val_streams.forms),
                             flags_of(MODE_XOR, layouts, ts_streams.forms, RAW) | XOR_ZSTD)
    head["ts_k"], head["first_ts"] = ts_streams.ks, ts[starts]
    head["value_k"] = np.where(is_int, val_streams.ks, 0)
    head["decimals"] = np.where(is_int, decimals, 0)
    # Unsigned 64-bit columns, never stacked with signed ones: numpy would make them float64,
    # which cannot hold a zigzagged first difference or gap past 2**53.
    fields = np.zeros((n, 5), np.uint64)
    fields[:, 0], fields[:, 1], fields[:, 2] = zigzag(ts_delta), ts_streams.sizes, val_sizes
    fields[:, 3] = zigzag(ints[starts].astype(np.int64))
    fields[:, 4] = zigzag(d1[np.minimum(starts + 1, total - 1)])
    used = np.ones(fields.shape, bool)
    used[:, 3] = is_int
    used[:, 4] = is_int & (order == 2)
    varints, mask = encode_varint_rows(fields, used)
    grid = np.concatenate((head.view(np.uint8).reshape(n, HEAD.size), varints.reshape(n, -1)), axis=1)
    kept = np.concatenate((np.ones((n, HEAD.size), bool), mask.reshape(n, -1)), axis=1)
    blob = grid[kept].tobytes()
    head_sizes = kept.sum(axis=1)
    return [blob[e - h : e] + t + v for e, h, t, v in
            zip(np.cumsum(head_sizes).tolist(), head_sizes.tolist(), ts_streams.parts, val_parts)]


def _xor_part(rows: np.ndarray, repeated: int) -> tuple[int, bytes]:
    """(layout, packed bytes) of one chunk's XORed values (``repeated``: how many of them equal
    the value before): 1 for byte planes, 2 for whole words. Words pack smaller where a quarter
    or more of the values repeat (a float counter that is idle most of the time: 0.96 against
    1.74 bytes a sample, deflated) or where nearly nothing changes (the planes already under a
    byte a sample); only then are both packed and the smaller kept. Elsewhere the planes were
    8-16 % smaller, and packing both every time took a fifth of the CPU of a store
    checkpointing early under memory pressure (when this was deflate)."""
    planes = pack(rows.T.tobytes(), XOR_ZSTD_LEVEL)
    if 4 * repeated < len(rows) and len(planes) >= len(rows):
        return 1, planes
    words = pack(rows.tobytes(), XOR_ZSTD_LEVEL)
    return (2, words) if len(words) < len(planes) else (1, planes)


def _xor_rows(vals: Float64Array, at: Int64Array) -> np.ndarray:
    """Each value's bits XOR the previous value's in its segment (the first's as they are), as
    rows of 8 little-endian bytes."""
    bits = vals.view(np.uint64)
    xored = bits.copy()
    xored[1:] ^= bits[:-1]
    xored[at == 0] = bits[at == 0]
    return xored.astype("<u8").view(np.uint8).reshape(-1, 8)


def decode_v2(data: bytes, n: int) -> tuple[Int64Array, Float64Array]:
    if len(data) < HEAD.size:
        raise ChunkDecodeError("chunk header is truncated")
    version, flags, ts_k, val_k, decimals, first_ts = HEAD.unpack_from(data, 0)
    if version != ENCODING_V2:
        raise ChunkDecodeError(f"unknown chunk version {version}")
    mode, order, ts_form, val_form = flags & 1, 1 + (flags >> 1 & 1), flags >> 2 & 3, flags >> 4 & 3
    if (flags >> 7 or (mode == MODE_XOR and (val_form != RAW or val_k or decimals))
            or (mode == MODE_INT and flags & XOR_ZSTD)
            or (mode == MODE_INT and (order == 2 and n < 3 or not 0 <= decimals <= MAX_DECIMALS))):
        raise ChunkDecodeError(f"bad chunk header (flags {flags:#x}, {n} samples)")
    try:
        fields, at = [], HEAD.size
        for _ in range(3 + (mode == MODE_INT) + (mode == MODE_INT and order == 2)):
            value, at = decode_varint(data, at)
            fields.append(value)
    except VarintError as exc:
        raise ChunkDecodeError(f"chunk header is truncated ({exc})") from exc
    first_gap, ts_size, val_size = unzigzag_int(fields[0]), fields[1], fields[2]
    ts_res, at = read_stream(data, at, ts_form, ts_k, ts_size, max(n - 2, 0))
    ts = np.empty(n, dtype=np.int64)
    ts[0] = first_ts
    if n > 1:
        gaps = first_gap + np.concatenate(([0], np.cumsum(unzigzag(ts_res))))
        ts[1:] = first_ts + np.cumsum(gaps)
    if mode == MODE_INT:
        residual, at = read_stream(data, at, val_form, val_k, val_size, n - order)
        deltas = unzigzag(residual)
        if order == 2:
            deltas = unzigzag_int(fields[4]) + np.concatenate(([0], np.cumsum(deltas)))
        first = unzigzag_int(fields[3])
        ints = np.empty(n, np.int64)
        ints[0] = first
        ints[1:] = first + np.cumsum(deltas)
        values = ints.astype(np.float64) / (10.0**decimals)
    else:
        if at + val_size > len(data):
            raise ChunkDecodeError("chunk is truncated")
        raw = xor_values(data[at : at + val_size], bool(flags & XOR_ZSTD), "chunk", 8 * n)
        at += val_size
        if len(raw) != 8 * n:
            raise ChunkDecodeError("chunk is truncated or corrupt (its value planes do not count its samples)")
        as_bytes = np.frombuffer(raw, np.uint8)
        words = as_bytes.view("<u8") if order == 2 else planes_to_words(as_bytes.reshape(8, n))
        values = np.bitwise_xor.accumulate(words).view(np.float64)
    if at != len(data):
        raise ChunkDecodeError(f"chunk has {len(data) - at} bytes past its samples")
    return ts, values


def xor_values(part: bytes | memoryview, zstd: bool, where: str, limit: int) -> bytes:
    """A mode XOR chunk's packed values: a Zstandard frame, or (chunks written before) raw
    deflate; at most ``limit`` bytes (a corrupt part is refused before it inflates past it)."""
    if not zstd:
        return inflate(part, where, limit)
    try:
        return unpack(part, limit)
    except FrameError as exc:
        raise ChunkDecodeError(f"{where} {exc}") from None
