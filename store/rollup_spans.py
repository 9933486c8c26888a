"""Rollup rows stored as spans: one database row per series, resolution and stretch of buckets.

Why: a 1-minute rollup row summarised four samples of a 15 s scrape, and was written as a
database row of its own -- 500,000 rows for 2 M samples. Inserting them was the largest part
of a checkpoint (a third of it on SQLite; on PostgreSQL the rows and their index took 1.3 s of
server time for those 2 M samples, twice the binary COPY of the samples themselves), and they
were most of the database file (14 B a sample against 1.7 for the chunks). A span holds the
buckets of one series that one checkpoint flushed within one chunk range (the 2 h of a chunk):
120 minute buckets, or two hour buckets.

Payload: the span's buckets column by column -- the step from the previous bucket (in buckets;
the first is 0), the count (both int32), then sum, min, max, first, last and inc (float64), all
little-endian -- as one Zstandard frame at level 2 (:data:`BUCKET_BYTES` a bucket before that).
Column by column, the steps (all 1 where no minute is missing), the counts (all alike at a steady
scrape) and the aggregates of integer-valued series pack to a third.

Deflate at level 1, which spans used before, was a third of a checkpoint's time
(:mod:`store.zstd_frames` has the figures). Spans written by deflate (they start with zlib's 0x78
header; a Zstandard frame starts with its magic number) still read.

Buckets of one series never repeat across its spans: a bucket that an earlier, unaligned flush
started is taken out of that span and merged into the new one (:func:`split_last`, used by
:mod:`store.checkpoint`).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from store.flat_runs import range_breaks, segmented_cumsum
from store.rollup import Frame
from store.zstd_frames import MAGIC, FrameError, frame_size, pack, unpack

SPAN_COLUMNS = ("resolution_ms", "series_id", "first_ms", "last_ms", "n", "payload")
FLOATS = ("sum", "min", "max", "first", "last", "inc")
BUCKET_BYTES = 4 + 4 + 8 * len(FLOATS)
_LEVEL = 2

SpanRow = tuple[int, int, int, int, int, bytes]


def span_rows(resolution_ms: int, frame: Frame, window_ms: int) -> list[SpanRow]:
    """Rows of ``rollup_spans`` for ``frame`` (sorted by series, then bucket; buckets unique):
    one per series and ``window_ms`` stretch of buckets."""
    if len(frame) == 0:
        return []
    return _pack(resolution_ms, frame, range_breaks(frame.sid, frame.bucket, window_ms))


def _pack(resolution_ms: int, frame: Frame, new_span: np.ndarray) -> list[SpanRow]:
    """One row per span of ``frame``; ``new_span`` marks the first bucket of each."""
    n = len(frame)
    starts = np.flatnonzero(new_span)
    ends = np.append(starts[1:], n)
    steps = np.zeros(n, "<i4")
    steps[1:] = np.where(new_span[1:], 0, (frame.bucket[1:] - frame.bucket[:-1]) // resolution_ms)
    counts = frame.count.astype("<i4")
    floats = np.stack([np.asarray(getattr(frame, name), "<f8") for name in FLOATS])  # (6, n)
    return [
        (resolution_ms, sid, lo_ms, hi_ms, b - a,
         pack(steps[a:b].tobytes() + counts[a:b].tobytes() + floats[:, a:b].tobytes(), _LEVEL))
        for sid, lo_ms, hi_ms, a, b in zip(frame.sid[starts].tolist(), frame.bucket[starts].tolist(),
                                           frame.bucket[ends - 1].tolist(), starts.tolist(), ends.tolist())
    ]


def _columns(payload: bytes, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, counts, floats (6, n)) of one span; a payload that does not hold ``n`` buckets
    is an error naming both sizes."""
    if n < 1:
        raise ValueError(f"rollup span row says it holds {n} buckets")
    raw = _unpack(payload, n)
    if len(raw) != n * BUCKET_BYTES:
        raise ValueError(f"rollup span holds {len(raw) // BUCKET_BYTES} buckets, its row says {n}")
    return (np.frombuffer(raw, "<i4", n), np.frombuffer(raw, "<i4", n, 4 * n),
            np.frombuffer(raw, "<f8", len(FLOATS) * n, 8 * n).reshape(len(FLOATS), n))


def _unpack(payload: bytes, n: int) -> bytes:
    """A span's columns from its payload: a Zstandard frame, or deflate (spans written before).
    A frame that says it is not ``n`` buckets is refused unread; a deflate stream is inflated
    no further than ``n`` buckets and a byte."""
    try:
        if payload[:4] != MAGIC:
            return _inflate(payload, n)
        size = frame_size(payload)
        if size != n * BUCKET_BYTES:
            held = "an unknown number of" if size < 0 else str(size // BUCKET_BYTES)
            raise ValueError(f"rollup span holds {held} buckets, its row says {n}")
        return unpack(payload, size)
    except (zlib.error, FrameError) as exc:
        raise ValueError(f"rollup span payload does not inflate: {exc}") from None


def _inflate(payload: bytes, n: int) -> bytes:
    inflater = zlib.decompressobj()
    raw = inflater.decompress(payload, n * BUCKET_BYTES + 1)
    if len(raw) > n * BUCKET_BYTES:
        raise ValueError(f"rollup span holds more than {n} buckets, its row says {n}")
    if not inflater.eof:
        raise ValueError("rollup span payload does not inflate: the deflate stream is cut")
    return raw


def frame_of_spans(rows: Sequence[tuple[Any, ...]], resolution_ms: int) -> Frame:
    """Rows of (series_id, first_ms, n, payload), ordered by series and first bucket, as one
    frame sorted by series and bucket."""
    if not rows:
        return Frame.empty()
    steps, counts, floats = [], [], []
    for _, _, n, payload in rows:
        s, c, f = _columns(bytes(payload), int(n))
        steps.append(s)
        counts.append(c)
        floats.append(f)
    n_of = np.asarray([int(r[2]) for r in rows], np.int64)
    first = np.repeat(np.asarray([r[1] for r in rows], np.int64), n_of)
    offset = segmented_cumsum(np.concatenate(steps).astype(np.int64), n_of)  # each span's steps summed
    values = np.concatenate(floats, axis=1)
    return Frame(np.repeat(np.asarray([r[0] for r in rows], np.int64), n_of), first + offset * resolution_ms,
                 np.concatenate(counts).astype(np.int64), *(np.ascontiguousarray(v) for v in values))


def split_last(rows: Sequence[tuple[Any, ...]], resolution_ms: int) -> tuple[Frame, list[SpanRow]]:
    """Spans (series_id, first_ms, n, payload) with their last bucket taken out: those buckets
    as a frame, and the spans that are left (full ``rollup_spans`` rows; a span of one bucket
    is gone)."""
    if not rows:
        return Frame.empty(), []
    frame = frame_of_spans(rows, resolution_ms)
    n_of = np.asarray([int(r[2]) for r in rows], np.int64)
    ends = np.cumsum(n_of) - 1
    keep = np.ones(len(frame), bool)
    keep[ends] = False
    first_of_span = np.zeros(len(frame), bool)
    first_of_span[ends - n_of + 1] = True
    left = np.flatnonzero(keep)
    return frame.take(ends), _pack(resolution_ms, frame.take(left), first_of_span[left]) if len(left) else []


def in_buckets(frame: Frame, start_ms: int, end_ms: int | None) -> Frame:
    """The rows of a sorted-by-series frame whose buckets are in [start, end] (no end: all
    from start)."""
    keep = frame.bucket >= start_ms
    if end_ms is not None:
        keep &= frame.bucket <= end_ms
    return frame if keep.all() else frame.take(np.flatnonzero(keep))
