"""Many encoding-2 chunks (:mod:`store.codec_v2`) decoded together (see :mod:`store.batch_decode`).

Fixed header fields are gathered for every chunk at once and the varints one field at a time
for every chunk; the Rice-coded streams of all chunks are decoded together
(:func:`store.rice.decode_unary`, :func:`store.rice.decode_lows`). Python touches a chunk only
to unpack a packed part (XOR planes, or a rarely moving stream's unary part).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from store.batch_parts import fail_where, inflate_each, joined
from store.codec_parts import MAX_DECIMALS
from store.codec_v2 import ENCODING_V2, HEAD, MODE_INT, XOR_ZSTD, unzigzag, xor_values
from store.flat_runs import after_first, gather_rows, segmented_cumsum, segmented_xor, spread, starts_of
from store.residual_streams import DEFLATED, RAW, SPARSE, ZERO
from store.rice import MAX_K, decode_lows, decode_unary, lows_sizes, run_int_sums, unary_limit
from store.types import Float64Array, Int64Array
from store.varint import decode_varints_at


def decode_v2_many(datas: Sequence[bytes], n: Int64Array, positions: Int64Array) -> tuple[Int64Array, Float64Array]:
    blobs, at, sizes = joined(datas)
    end = at + sizes
    fail_where([(sizes < HEAD.size, "header is truncated")], positions)
    version, flags, ts_k, val_k = (blobs[at + k].astype(np.int64) for k in range(4))
    decimals = blobs[at + 4].view(np.int8).astype(np.int64)
    first_ts = gather_rows(blobs, at + 5, 8).view("<i8").ravel()
    mode, order = flags & 1, 1 + (flags >> 1 & 1)
    ts_form, val_form = flags >> 2 & 3, flags >> 4 & 3
    is_int = mode == MODE_INT
    fail_where([
        (version != ENCODING_V2, "unknown chunk version"),
        ((flags >> 7 != 0) | (is_int & ((flags & XOR_ZSTD) != 0))
         | (~is_int & ((val_form != RAW) | (val_k != 0) | (decimals != 0)))
         | (is_int & (((order == 2) & (n < 3)) | (decimals < 0) | (decimals > MAX_DECIMALS)))
         | (ts_k > MAX_K) | (val_k > MAX_K), "bad chunk header"),
    ], positions)
    fields, pos = [], at + HEAD.size
    for field in range(5):
        value, after, bad = decode_varints_at(blobs, pos)
        present = np.ones(len(n), bool) if field < 3 else (is_int if field == 3 else is_int & (order == 2))
        bad = bad[present[bad]]
        broken = np.zeros(len(n), bool)
        broken[bad] = True
        fail_where([(broken | (present & (after > end)), "header is truncated")], positions)
        fields.append(value)
        pos = np.where(present, after, pos)
    # sizes compared while unsigned: a corrupt one of 2**63 or more would turn negative as int64
    too_big = (fields[1] > sizes.astype(np.uint64)) | (fields[2] > sizes.astype(np.uint64))
    fail_where([(too_big, "chunk is truncated")], positions)
    first_gap, ts_size, val_size = unzigzag(fields[0]), fields[1].astype(np.int64), fields[2].astype(np.int64)

    ts_counts = np.maximum(n - 2, 0)
    ts_res, pos = _streams(datas, blobs, at, end, pos, ts_form, ts_k, ts_size, ts_counts, positions)
    gaps = np.empty(int((n - 1).sum()), np.int64)
    gap_at = starts_of(n - 1)
    has_gap = n > 1
    gaps[gap_at[has_gap]] = first_gap[has_gap]
    gaps[spread(gap_at[has_gap] + 1, ts_counts[has_gap])] = (
        np.repeat(first_gap[has_gap], ts_counts[has_gap]) + segmented_cumsum(unzigzag(ts_res), ts_counts[has_gap]))
    ts = _integrate(first_ts, gaps, n)

    values = np.empty(len(ts), np.float64)
    out_starts = starts_of(n)
    ints = np.flatnonzero(is_int)
    if len(ints):
        m, o = n[ints], order[ints]
        residual, pos[ints] = _streams([datas[i] for i in ints.tolist()], blobs, at[ints], end[ints], pos[ints],
                                       val_form[ints], val_k[ints], val_size[ints], m - o, positions[ints])
        whole = _integrate(unzigzag(fields[3][ints]), _deltas(unzigzag(fields[4][ints]), o, m, unzigzag(residual)), m)
        # the same float operation as the per-chunk decoder: int64 -> float64, then / 10**k
        scale = np.repeat(10.0 ** decimals[ints].astype(np.float64), m)
        values[spread(out_starts[ints], m)] = whole.astype(np.float64) / scale
    xors = np.flatnonzero(~is_int)
    if len(xors):
        m = n[xors]
        fail_where([((pos + val_size > end) & ~is_int, "chunk is truncated")], positions)
        planes = [memoryview(datas[i])[int(pos[i] - at[i]) : int(pos[i] - at[i] + val_size[i])] for i in xors.tolist()]
        zstd = ((flags[xors] & XOR_ZSTD) != 0).tolist()
        buf, plane_at, plane_size = joined([xor_values(part, z, f"chunk {p}", limit) for part, z, p, limit
                                            in zip(planes, zstd, positions[xors].tolist(), (8 * m).tolist())])
        wrong = np.zeros(len(n), bool)
        wrong[xors] = plane_size != 8 * m
        fail_where([(wrong, "chunk is truncated or corrupt (its value planes do not count its samples)")], positions)
        # mode XOR's order bit: whole words rather than planes
        words = _planes_to_words(buf, plane_at, m, order[xors] == 2)
        values[spread(out_starts[xors], m)] = segmented_xor(words, m).view(np.float64)
        pos[xors] += val_size[xors]
    fail_where([(pos != end, "chunk has bytes past its samples")], positions)
    return ts, values


def _planes_to_words(buf: np.ndarray, plane_at: Int64Array, m: Int64Array, whole: np.ndarray) -> np.ndarray:
    """Chunks' words from their 8 byte planes (chunk c's plane p: ``m[c]`` bytes from
    ``plane_at[c] + p * m[c]``), or from whole words where ``whole``; the chunks' words back to back."""
    words = np.empty((int(m.sum()), 8), np.uint8)
    word_at = starts_of(m)
    planar = np.flatnonzero(~whole)
    rows = spread(word_at[planar], m[planar])
    for p in range(8):
        words[rows, p] = buf[spread(plane_at[planar] + p * m[planar], m[planar])]
    flat = np.flatnonzero(whole)
    if len(flat):
        words[spread(word_at[flat], m[flat])] = buf[spread(plane_at[flat], 8 * m[flat])].reshape(-1, 8)
    return words.view("<u8").ravel()


def _streams(datas: Sequence[bytes], blobs: np.ndarray, at: Int64Array, end: Int64Array, pos: Int64Array,
             form: Int64Array, k: Int64Array, size: Int64Array, counts: Int64Array,
             positions: Int64Array) -> tuple[np.ndarray, Int64Array]:
    """One residual stream of every chunk (:mod:`store.residual_streams`), from ``pos`` in
    ``blobs``: (residuals, runs joined; offsets after each stream)."""
    zero = form == ZERO
    fail_where([(zero & ((size != 0) | (k != 0)), "bad chunk header (a zero stream with bytes)")], positions)
    if zero.all():
        return np.zeros(int(counts.sum()), np.uint64), pos
    unary_pos = pos.copy()  # where each stream's unary part starts
    coded = np.where(zero, 0, counts)  # residuals Rice-coded in each stream
    sparse = np.flatnonzero(form == SPARSE)
    flags = np.zeros(0, bool)
    if len(sparse):
        flags, unary_pos[sparse], coded[sparse] = _bitmaps(
            [datas[i] for i in sparse.tolist()], blobs, at[sparse], end[sparse], pos[sparse], counts[sparse],
            positions[sparse])
    fail_where([(~zero & (unary_pos + size > end), "chunk is truncated")], positions)
    deflated = np.flatnonzero(form == DEFLATED)
    stored = np.flatnonzero((form == RAW) | (form == SPARSE))
    inflated = inflate_each([memoryview(datas[i])[int(pos[i] - at[i]) : int(pos[i] - at[i] + size[i])]
                             for i in deflated.tolist()], positions[deflated], unary_limit(counts[deflated]).tolist())
    # one buffer of every coded unary part: the stored ones cut from the blobs, then the inflated
    unary_size = np.zeros(len(counts), np.int64)
    unary_size[stored] = size[stored]
    unary_size[deflated] = [len(u) for u in inflated]
    unary_at = starts_of(unary_size)
    unary = np.empty(int(unary_size.sum()), np.uint8)
    unary[spread(unary_at[stored], size[stored])] = blobs[spread(unary_pos[stored], size[stored])]
    if len(deflated):
        unary[spread(unary_at[deflated], unary_size[deflated])] = np.frombuffer(b"".join(inflated), np.uint8)
    quotient, bad = decode_unary(unary, unary_at, unary_size, coded)
    broken = np.zeros(len(counts), bool)
    broken[bad] = True
    fail_where([(broken, "chunk is truncated or corrupt (its unary codes do not count its samples)")], positions)
    lows_at = unary_pos + np.where(zero, 0, size)
    need = lows_sizes(quotient, coded, k)
    fail_where([(lows_at + need > end, "chunk is truncated")], positions)
    values = decode_lows(blobs, lows_at, coded, k, quotient)
    out = np.zeros(int(counts.sum()), np.uint64)
    whole = np.flatnonzero(~zero & (form != SPARSE))
    out_at, value_at = starts_of(counts), starts_of(coded)
    out[spread(out_at[whole], counts[whole])] = values[spread(value_at[whole], coded[whole])]
    if len(sparse):
        out[spread(out_at[sparse], counts[sparse])[flags]] = values[spread(value_at[sparse], coded[sparse])] + np.uint64(1)
    return out, lows_at + need


def _bitmaps(datas: Sequence[bytes], blobs: np.ndarray, at: Int64Array, end: Int64Array, pos: Int64Array,
             counts: Int64Array, positions: Int64Array) -> tuple[np.ndarray, Int64Array, Int64Array]:
    """SPARSE streams' bitmaps of nonzero residuals: (flags, runs joined; where each stream's
    unary part starts; nonzero residuals per stream)."""
    length, after, bad = decode_varints_at(blobs, pos)
    broken = np.zeros(len(pos), bool)
    broken[bad] = True
    broken |= length > np.maximum(end - after, 0).astype(np.uint64)  # unsigned: see the header sizes
    length = np.where(broken, 0, length).astype(np.int64)
    fail_where([(broken | (after + length > end), "chunk is truncated")], positions)
    maps = inflate_each([memoryview(d)[int(a - s) : int(a - s + n)] for d, a, s, n in
                         zip(datas, after.tolist(), at.tolist(), length.tolist())], positions, ((counts + 7) // 8).tolist())
    buf, map_at, map_size = joined(maps)
    bits = np.unpackbits(buf, bitorder="little")
    padding = spread(8 * map_at + counts, np.maximum(8 * map_size - counts, 0))
    spoiled = map_size != (counts + 7) // 8
    spoiled[np.unique(np.searchsorted(8 * map_at, padding[bits[padding] > 0], side="right") - 1)] = True
    fail_where([(spoiled, "chunk is corrupt (its bitmap does not count its samples)")], positions)
    flags = bits[spread(8 * map_at, counts)].astype(bool)
    return flags, after + length, run_int_sums(flags.astype(np.int64), counts)


def _deltas(first_delta: Int64Array, order: Int64Array, m: Int64Array, residual: Int64Array) -> Int64Array:
    """Each chunk's (m - 1) differences of its scaled integers: the residuals themselves at
    order 1; at order 2 the stored first difference, then it plus the residuals' running sum."""
    r = m - order
    deltas = np.empty(int((m - 1).sum()), np.int64)
    delta_at, residual_at = starts_of(m - 1), starts_of(r)
    first = np.flatnonzero(order == 1)
    deltas[spread(delta_at[first], r[first])] = residual[spread(residual_at[first], r[first])]
    second = np.flatnonzero(order == 2)
    if len(second):
        r2 = r[second]
        deltas[delta_at[second]] = first_delta[second]
        running = segmented_cumsum(residual[spread(residual_at[second], r2)], r2)
        with np.errstate(over="ignore"):
            deltas[spread(delta_at[second] + 1, r2)] = np.repeat(first_delta[second], r2) + running
    return deltas


def _integrate(first: Int64Array, deltas: Int64Array, n: Int64Array) -> Int64Array:
    """Each run's first value, then it plus the running sum of its (n - 1) deltas."""
    out = np.empty(int(n.sum()), np.int64)
    starts = starts_of(n)
    out[starts] = first
    with np.errstate(over="ignore"):
        out[after_first(starts, n)] = np.repeat(first, n - 1) + segmented_cumsum(deltas, n - 1)
    return out
