"""What the chunk encodings share: the error type, the deflate settings, the search for the
fewest decimals that make a chunk's values integers, and timestamps' deltas-of-deltas."""

from __future__ import annotations

import zlib

import numpy as np

from store.types import Float64Array, Int64Array

# Raw deflate with a 4 KiB window: chunks are small, and a smaller window and a smaller hash
# table (memLevel) make each compressor cheaper to set up; that set-up, not the compression
# itself, dominates the cost of small chunks.
WBITS = -12
MEM_LEVEL = 4
MAX_DECIMALS = 6
_EXACT_LIMIT = float(2**52)


class ChunkDecodeError(ValueError):
    """A stored chunk does not decode: corruption or an unknown encoding."""


def deflate(raw: bytes, level: int = 6) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, WBITS, MEM_LEVEL)
    return compressor.compress(raw) + compressor.flush()


def inflate(data: bytes | memoryview, where: str = "chunk", limit: int | None = None) -> bytes:
    """Raw-inflate ``data``. ``limit``: the most bytes the part can hold; a corrupt part that
    would inflate past it (a few KB can inflate to gigabytes) is refused before it does."""
    try:
        if limit is None:
            return zlib.decompress(data, WBITS)
        inflater = zlib.decompressobj(WBITS)
        out = inflater.decompress(data, limit)
    except zlib.error as exc:
        raise ChunkDecodeError(f"{where} does not decompress: {exc}") from exc
    if inflater.unconsumed_tail:
        raise ChunkDecodeError(f"{where} does not decompress: it inflates past the {limit} bytes it can hold")
    if not inflater.eof:
        raise ChunkDecodeError(f"{where} does not decompress: the deflate stream is cut")
    return out


def decimals_per_segment(values: Float64Array, starts: Int64Array) -> Int64Array:
    """Per segment, the smallest k with every value exactly an integer / 10**k; -1 if none."""
    result = np.full(len(starts), -1, dtype=np.int64)
    # Negative zero would come back as +0.0 from the integer path; keep its bits exact.
    finite = np.isfinite(values) & ~((values == 0) & np.signbit(values))
    for decimals in range(MAX_DECIMALS + 1):
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


def segment_ends(starts: Int64Array, total: int) -> Int64Array:
    return np.append(starts[1:], total).astype(np.int64)


def timestamp_dods(ts: Int64Array, starts: Int64Array) -> Int64Array:
    """Per sample, the delta-of-delta of the timestamps within its segment: zero at a segment's
    first sample (which the header carries), the first delta itself at its second."""
    total = len(ts)
    ends = segment_ends(starts, total)
    is_start = np.zeros(total, dtype=bool)
    is_start[starts] = True
    delta = np.zeros(total, dtype=np.int64)
    delta[1:] = ts[1:] - ts[:-1]
    delta[is_start] = 0
    dod = delta.copy()
    dod[1:] -= delta[:-1]
    second = starts + 1
    second = second[second < ends]
    dod[second] = delta[second]
    dod[is_start] = 0
    return dod
