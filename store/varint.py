"""LEB128 varints (7 bits a byte, low groups first, high bit = more follows): one at a time in
Python, or one per run for many runs at once (numpy)."""

from __future__ import annotations

import numpy as np

from store.types import Int64Array

MAX_BYTES = 10  # a 64-bit value


class VarintError(ValueError):
    """A varint runs past its buffer or past 64 bits."""


def zigzag_int(value: int) -> int:
    """A signed 64-bit value as unsigned: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    return value << 1 if value >= 0 else ((-value) << 1) - 1


def unzigzag_int(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_varints(values: list[int]) -> bytes:
    """Unsigned values below 2**64."""
    out = bytearray()
    for value in values:
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def decode_varint(buf: bytes | memoryview, at: int) -> tuple[int, int]:
    """(value, offset after it)."""
    value = shift = 0
    for i in range(MAX_BYTES):
        if at + i >= len(buf):
            raise VarintError("varint runs past the end")
        byte = buf[at + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, at + i + 1
        shift += 7
    raise VarintError("varint longer than 10 bytes")


def decode_varints_at(buf: np.ndarray, at: Int64Array) -> tuple[np.ndarray, Int64Array, Int64Array]:
    """One varint from each offset of ``buf`` (uint8): (values as uint64, offsets after them,
    positions whose varint runs past the buffer or 10 bytes)."""
    padded = np.concatenate((buf, np.zeros(MAX_BYTES, np.uint8)))
    grid = padded[at[:, None] + np.arange(MAX_BYTES, dtype=np.int64)]
    last = grid < 0x80
    length = np.argmax(last, axis=1) + 1
    bad = ~last.any(axis=1) | (at + length > len(buf))
    used = np.arange(MAX_BYTES)[None, :] < length[:, None]
    groups = (grid & 0x7F).astype(np.uint64) * used
    shifts = (7 * np.arange(MAX_BYTES, dtype=np.uint64))[None, :]
    values = np.bitwise_or.reduce(groups << shifts, axis=1) if len(at) else np.zeros(0, np.uint64)
    return values.astype(np.uint64), at + length, np.flatnonzero(bad)


def encode_varint_rows(values: np.ndarray, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``values`` (uint64, one row per record), the varints of its ``used`` fields
    back to back, and each one's length: an (rows, fields, MAX_BYTES) grid of bytes and its mask
    (row by row, field by field, in order), for :func:`store.codec_v2` to lay out chunk headers
    at once instead of a Python loop per value."""
    v = np.asarray(values, np.uint64)
    length = np.ones(v.shape, np.int64)
    for group in range(1, MAX_BYTES):
        length += v >= np.uint64(1 << (7 * group))
    length[~used] = 0
    j = np.arange(MAX_BYTES, dtype=np.int64)
    groups = (v[..., None] >> (7 * j).astype(np.uint64)) & np.uint64(0x7F)
    more = (j < length[..., None] - 1).astype(np.uint64) << np.uint64(7)
    return (groups | more).astype(np.uint8), j < length[..., None]
