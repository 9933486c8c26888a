"""Many encoding-1 chunks (:mod:`store.codec_v1`) decoded together (see :mod:`store.batch_decode`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from store.batch_parts import fail_where, inflate_each, joined
from store.codec_v1 import ENCODING_V1, HEADER, MODE_INT, MODE_XOR, SIGNED_WIDTHS
from store.flat_runs import after_first, gather_rows, segmented_cumsum, segmented_xor, spread, starts_of
from store.types import Float64Array, Int64Array

DTYPES = {width: np.dtype(dtype).newbyteorder("<") for width, dtype in SIGNED_WIDTHS}


def decode_v1_many(datas: Sequence[bytes], n: Int64Array, positions: Int64Array) -> tuple[Int64Array, Float64Array]:
    buf, at, sizes = joined(inflate_each(datas, positions, (HEADER.size + 8 + 16 * n).tolist()))
    short = sizes < HEADER.size
    fail_where([(short, "header is truncated")], positions)
    version, ts_width, mode, value_width = (buf[at + k].astype(np.int64) for k in range(4))
    decimals = buf[at + 4].view(np.int8).astype(np.int64)
    first_ts = gather_rows(buf, at + 5, 8).view("<i8").ravel()
    widths_ok = np.isin(ts_width, list(DTYPES)) & ((mode == MODE_XOR) | np.isin(value_width, list(DTYPES)))
    body_size = np.where(mode == MODE_INT, 8 + (n - 1) * value_width, 8 * n)
    fail_where([
        (version != ENCODING_V1, "unknown chunk version"),
        (~widths_ok, "bad integer width"),
        (~np.isin(mode, (MODE_INT, MODE_XOR)), "unknown value mode"),
        (sizes < HEADER.size + (n - 1) * ts_width + body_size, "chunk is truncated"),
    ], positions)

    dod_at = at + HEADER.size
    ts = timestamps(buf, dod_at, n, ts_width, first_ts)
    out_starts = starts_of(n)
    values = np.empty(len(ts), np.float64)
    body_at = dod_at + (n - 1) * ts_width
    ints = np.flatnonzero(mode == MODE_INT)
    if len(ints):
        m = n[ints]
        first = gather_rows(buf, body_at[ints], 8).view("<i8").ravel()
        deltas = columns(buf, body_at[ints] + 8, m - 1, value_width[ints])
        whole = np.empty(int(m.sum()), np.int64)
        starts = starts_of(m)
        whole[starts] = first
        whole[after_first(starts, m)] = np.repeat(first, m - 1) + segmented_cumsum(deltas, m - 1)
        # the same float operation as the per-chunk decoder: int64 -> float64, then / 10**k
        scale = np.repeat(10.0 ** decimals[ints].astype(np.float64), m)
        values[spread(out_starts[ints], m)] = whole.astype(np.float64) / scale
    xors = np.flatnonzero(mode == MODE_XOR)
    if len(xors):
        m = n[xors]
        words = gather_many(buf, body_at[xors], m, 8).view("<u8").ravel()
        values[spread(out_starts[xors], m)] = segmented_xor(words, m).view(np.float64)
    return ts, values


def gather_many(buf: np.ndarray, at: Int64Array, lengths: Int64Array, width: int) -> np.ndarray:
    """``lengths[i]`` consecutive ``width``-byte items from each offset, all runs joined."""
    first_bytes = spread(at, lengths * width)
    return np.ascontiguousarray(buf[first_bytes]).reshape(-1, width)


def columns(buf: np.ndarray, at: Int64Array, lengths: Int64Array, widths: Int64Array) -> Int64Array:
    """Little-endian signed integers, ``lengths[i]`` of width ``widths[i]`` from ``at[i]``,
    as one int64 column (runs in chunk order)."""
    out = np.empty(int(lengths.sum()), np.int64)
    run_at = starts_of(lengths)
    for width, dtype in DTYPES.items():
        rows = np.flatnonzero((widths == width) & (lengths > 0))
        if not len(rows):
            continue
        items = gather_many(buf, at[rows], lengths[rows], width)
        out[spread(run_at[rows], lengths[rows])] = items.view(dtype).ravel()
    return out


def timestamps(buf: np.ndarray, dod_at: Int64Array, n: Int64Array, widths: Int64Array, first_ts: Int64Array) -> Int64Array:
    """Every chunk's timestamps from its first and its (n-1) deltas-of-deltas."""
    out_starts = starts_of(n)
    ts = np.empty(int(n.sum()), np.int64)
    ts[out_starts] = first_ts
    dods = columns(buf, dod_at, n - 1, widths)
    ts[after_first(out_starts, n)] = np.repeat(first_ts, n - 1) + segmented_cumsum(segmented_cumsum(dods, n - 1), n - 1)
    return ts
