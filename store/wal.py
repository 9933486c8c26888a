"""Write-ahead payloads: one acknowledged batch as three raw little-endian columns.

Deliberately uncompressed: the row lives only until the next checkpoint, and the cheapest
possible encoding keeps the acknowledged-write path close to the raw driver's speed.
"""

from __future__ import annotations

import struct

import numpy as np

from store.types import Float64Array, Int64Array

_HEADER = struct.Struct("<4sI")
_MAGIC = b"IMW1"


class WalDecodeError(ValueError):
    """A write-ahead row does not decode (corruption)."""


def encode_wal(sid: Int64Array, ts: Int64Array, val: Float64Array) -> bytes:
    n = len(sid)
    return b"".join(
        (
            _HEADER.pack(_MAGIC, n),
            np.ascontiguousarray(sid, dtype="<i8").tobytes(),
            np.ascontiguousarray(ts, dtype="<i8").tobytes(),
            np.ascontiguousarray(val, dtype="<f8").tobytes(),
        )
    )


def decode_wal(payload: bytes) -> tuple[Int64Array, Int64Array, Float64Array]:
    payload = bytes(payload)
    if len(payload) < _HEADER.size:
        raise WalDecodeError("write-ahead row is truncated")
    magic, n = _HEADER.unpack_from(payload)
    if magic != _MAGIC or len(payload) != _HEADER.size + 24 * n:
        raise WalDecodeError(f"write-ahead row is corrupt (magic {magic!r}, {len(payload)} bytes for {n} samples)")
    off = _HEADER.size
    sid = np.frombuffer(payload, "<i8", n, off).astype(np.int64)
    ts = np.frombuffer(payload, "<i8", n, off + 8 * n).astype(np.int64)
    val = np.frombuffer(payload, "<f8", n, off + 16 * n).astype(np.float64)
    return sid, ts, val
