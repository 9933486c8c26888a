"""Decoding many chunks at once: the per-chunk work left in Python is one ``zlib.decompress``.

A query over the last hour of 30 k series reads 100 k+ chunks; :func:`store.codec.decode`
costs ~30 us of numpy set-up per chunk (header unpacking, two small accumulates, a division),
which made chunk decoding most of such a query's time. Here the decompressed chunks are joined
into one buffer and every column is rebuilt for all chunks together: headers are gathered
with fancy indexing, fixed-width integers are read per width class, and the running sums
(timestamps from deltas-of-deltas, integers from deltas, float bits from XORs) are one
accumulate over everything, made per-chunk by subtracting (XOR-ing out) each chunk's prefix.
Integer sums may wrap in int64 on the way; the per-chunk differences are still exact
(arithmetic modulo 2**64), and the true values fit, as they did in the per-chunk decoder.

The result is bit-for-bit what :func:`store.codec.decode` returns chunk by chunk (tested).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from store.codec import ENCODING_V1, ChunkDecodeError
from store.flat_runs import spread, starts_of
from store.types import Float64Array, Int64Array

_WBITS = -12  # as store.codec writes them
_HEADER_SIZE = 13  # u8 version, u8 ts_width, u8 mode, u8 value_width, i8 decimals, i64 first_ts
_MODE_INT, _MODE_XOR = 0, 1
_DTYPES: dict[int, np.dtype[np.signedinteger]] = {1: np.dtype("<i1"), 2: np.dtype("<i2"), 4: np.dtype("<i4"), 8: np.dtype("<i8")}


@dataclass(slots=True)
class DecodedChunks:
    """Chunk ``c``'s samples are ``ts[starts[c]:starts[c] + counts[c]]``."""

    ts: Int64Array
    values: Float64Array
    starts: Int64Array
    counts: Int64Array


def decode_many(datas: Sequence[bytes], counts: Sequence[int]) -> DecodedChunks:
    """Decode every chunk of ``datas`` (``counts[c]`` samples each). A chunk that does not
    decode raises :class:`ChunkDecodeError` naming its position in ``datas``."""
    n = np.asarray(counts, np.int64)
    if len(n) != len(datas):
        raise ValueError("decode_many needs one sample count per chunk")
    if len(n) and n.min() < 1:
        raise ChunkDecodeError(f"chunk {int(np.argmin(n))} claims {int(n.min())} samples")
    raws = []
    for c, data in enumerate(datas):
        try:
            raws.append(zlib.decompress(data, _WBITS))
        except zlib.error as exc:
            raise ChunkDecodeError(f"chunk {c} does not decompress: {exc}") from exc
    sizes = np.fromiter((len(r) for r in raws), np.int64, len(raws))
    buf = np.frombuffer(b"".join(raws), np.uint8)
    at = starts_of(sizes)
    short = np.flatnonzero(sizes < _HEADER_SIZE)
    if len(short):
        raise ChunkDecodeError(f"chunk {int(short[0])}: header is truncated")
    version, ts_width, mode, value_width = (buf[at + k].astype(np.int64) for k in range(4))
    decimals = buf[at + 4].view(np.int8).astype(np.int64)
    first_ts = _gather(buf, at + 5, 8).view("<i8").ravel()
    _check(version, ts_width, mode, value_width, n, sizes)

    out_starts = starts_of(n)
    total = int(n.sum())
    ts = np.empty(total, np.int64)
    ts[out_starts] = first_ts
    dod_at = at + _HEADER_SIZE
    dods = _columns(buf, dod_at, n - 1, ts_width)
    later = _positions_after_first(out_starts, n)  # where samples 1.. of every chunk go
    ts[later] = np.repeat(first_ts, n - 1) + _segmented_cumsum(_segmented_cumsum(dods, n - 1), n - 1)

    values = np.empty(total, np.float64)
    body_at = dod_at + (n - 1) * ts_width
    ints = np.flatnonzero(mode == _MODE_INT)
    if len(ints):
        m = n[ints]
        first = _gather(buf, body_at[ints], 8).view("<i8").ravel()
        deltas = _columns(buf, body_at[ints] + 8, m - 1, value_width[ints])
        whole = np.empty(int(m.sum()), np.int64)
        starts = starts_of(m)
        whole[starts] = first
        whole[_positions_after_first(starts, m)] = np.repeat(first, m - 1) + _segmented_cumsum(deltas, m - 1)
        # the same float operation as the per-chunk decoder: int64 -> float64, then / 10**k
        scale = np.repeat(10.0 ** decimals[ints].astype(np.float64), m)
        values[spread(out_starts[ints], m)] = whole.astype(np.float64) / scale
    xors = np.flatnonzero(mode == _MODE_XOR)
    if len(xors):
        m = n[xors]
        words = _gather_many(buf, body_at[xors], m, 8).view("<u8").ravel()
        values[spread(out_starts[xors], m)] = _segmented_xor(words, m).view(np.float64)
    return DecodedChunks(ts, values, out_starts, n)


def _check(version: Int64Array, ts_width: Int64Array, mode: Int64Array, value_width: Int64Array,
           n: Int64Array, sizes: Int64Array) -> None:
    widths_ok = np.isin(ts_width, list(_DTYPES)) & ((mode == _MODE_XOR) | np.isin(value_width, list(_DTYPES)))
    checks = (
        (version != ENCODING_V1, "unknown chunk version"),
        (~widths_ok, "bad integer width"),
        (~np.isin(mode, (_MODE_INT, _MODE_XOR)), "unknown value mode"),
    )
    for bad, what in checks:
        if bad.any():
            raise ChunkDecodeError(f"chunk {int(np.flatnonzero(bad)[0])}: {what}")
    body = np.where(mode == _MODE_INT, 8 + (n - 1) * value_width, 8 * n)
    truncated = sizes < _HEADER_SIZE + (n - 1) * ts_width + body
    if truncated.any():
        raise ChunkDecodeError(f"chunk {int(np.flatnonzero(truncated)[0])}: chunk is truncated")


def _positions_after_first(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    return spread(starts + 1, lengths - 1)


def _gather(buf: np.ndarray, at: Int64Array, width: int) -> np.ndarray:
    """``width`` bytes from each offset, as rows of a contiguous array."""
    return np.ascontiguousarray(buf[at[:, None] + np.arange(width, dtype=np.int64)])


def _gather_many(buf: np.ndarray, at: Int64Array, lengths: Int64Array, width: int) -> np.ndarray:
    """``lengths[i]`` consecutive ``width``-byte items from each offset, all runs joined."""
    first_bytes = spread(at, lengths * width)
    return np.ascontiguousarray(buf[first_bytes]).reshape(-1, width)


def _columns(buf: np.ndarray, at: Int64Array, lengths: Int64Array, widths: Int64Array) -> Int64Array:
    """Little-endian signed integers, ``lengths[i]`` of width ``widths[i]`` from ``at[i]``,
    as one int64 column (runs in chunk order)."""
    out = np.empty(int(lengths.sum()), np.int64)
    run_at = starts_of(lengths)
    for width, dtype in _DTYPES.items():
        rows = np.flatnonzero((widths == width) & (lengths > 0))
        if not len(rows):
            continue
        items = _gather_many(buf, at[rows], lengths[rows], width)
        out[spread(run_at[rows], lengths[rows])] = items.view(dtype).ravel()
    return out


def _segmented_cumsum(values: Int64Array, lengths: Int64Array) -> Int64Array:
    """Running sums restarting at every run (runs of ``lengths``, some possibly empty)."""
    if not len(values):
        return values.copy()
    with np.errstate(over="ignore"):
        running: Int64Array = np.cumsum(values)
        out: Int64Array = running - np.repeat(_prefix_before(running, lengths), lengths)
        return out


def _segmented_xor(words: np.ndarray, lengths: Int64Array) -> np.ndarray:
    running: np.ndarray = np.bitwise_xor.accumulate(words)
    out: np.ndarray = running ^ np.repeat(_prefix_before(running, lengths), lengths)
    return out


def _prefix_before(running: np.ndarray, lengths: Int64Array) -> np.ndarray:
    """The running value just before each run starts (0 for a run at the very start)."""
    starts = starts_of(lengths)
    before = np.zeros(len(lengths), running.dtype)
    inner = starts > 0
    before[inner] = running[starts[inner] - 1]
    return before
