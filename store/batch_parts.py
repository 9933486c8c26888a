"""What the batch decoders of both chunk encodings share: inflating each chunk, joining them
into one byte array, naming a bad chunk, and reading fixed-width integer columns of many chunks
at once (see :mod:`store.batch_decode`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from store.codec_parts import ChunkDecodeError, inflate
from store.flat_runs import after_first, segmented_cumsum, spread, starts_of
from store.types import Int64Array

DTYPES: dict[int, np.dtype[np.signedinteger]] = {
    1: np.dtype("<i1"), 2: np.dtype("<i2"), 4: np.dtype("<i4"), 8: np.dtype("<i8")
}


def inflate_each(datas: Sequence[bytes | memoryview], positions: Int64Array, limits: Sequence[int]) -> list[bytes]:
    """Each part inflated, at most ``limits[c]`` bytes of it (see :func:`store.codec_parts.inflate`)."""
    return [inflate(data, f"chunk {int(positions[c])}", limit) for c, (data, limit) in enumerate(zip(datas, limits))]


def joined(parts: Sequence[bytes]) -> tuple[np.ndarray, Int64Array, Int64Array]:
    """The parts back to back as one byte array, with each part's offset and size."""
    sizes = np.fromiter((len(p) for p in parts), np.int64, len(parts))
    return np.frombuffer(b"".join(parts), np.uint8), starts_of(sizes), sizes


def fail_where(checks: Sequence[tuple[np.ndarray, str]], positions: Int64Array) -> None:
    """Raise for the first check with a bad chunk, naming that chunk's position."""
    for bad, what in checks:
        if bad.any():
            raise ChunkDecodeError(f"chunk {int(positions[int(np.flatnonzero(bad)[0])])}: {what}")


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


def plane_words(buf: np.ndarray, at: Int64Array, lengths: Int64Array, widths: Int64Array) -> np.ndarray:
    """Unsigned words stored as byte planes: run i is ``widths[i]`` planes of ``lengths[i]``
    bytes from ``at[i]`` (plane p holds byte p of every word); all runs joined, as uint64."""
    out = np.zeros(int(lengths.sum()), np.uint64)
    run_at = starts_of(lengths)
    for p in range(8):
        rows = np.flatnonzero((widths > p) & (lengths > 0))
        if not len(rows):
            break
        source = spread(at[rows] + p * lengths[rows], lengths[rows])
        out[spread(run_at[rows], lengths[rows])] |= buf[source].astype(np.uint64) << np.uint64(8 * p)
    return out
