"""Reading chunks for a set of series: one SQL lookup per batch of series, the decoded chunks
of recent reads from the :class:`~store.chunk_cache.ChunkCache`, the rest decoded together
(:func:`store.batch_decode.decode_many`) and remembered."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from store.batch_decode import DecodedChunks, decode_many
from store.chunk_cache import ChunkKey, assemble
from store.cold_tier import cold_chunks
from store.flat_runs import SeriesRuns, spread, starts_of
from store.rollup_reads import batches, fetch_rows
from store.types import Int64Array

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore


def read_chunks(store: TimeSeriesStore, sids: Int64Array, below: Int64Array, start_ms: int, end_ms: int) -> SeriesRuns:
    """Chunk samples of each series in [start, min(end, below[sid] - 1)], series by series (in
    the order rows come back) and in time order within each."""
    wanted = below > start_ms
    sids, below = sids[wanted], below[wanted]
    if not len(sids):
        return SeriesRuns.empty()
    upper = min(end_ms, int(below.max()) - 1)
    keys: list[ChunkKey] = []
    p = store.backend.param
    for group in batches(sids.tolist()):
        keys += fetch_rows(store,
            f"SELECT id, series_id, start_ms, end_ms, n FROM chunks WHERE series_id IN ({', '.join([p] * len(group))}) "
            f"AND end_ms >= {p} AND start_ms <= {p} ORDER BY series_id, start_ms",
            (*group, start_ms, upper),
        )
    blobs: dict[int, tuple[int, bytes]] = {}
    if store.cold is not None:
        cold = cold_chunks(store, store.cold, sids.tolist(), start_ms, upper)
        if cold:
            # A chunk moved while this read listed it is in both: once, from the file.
            hot = {k[0] for k in keys}
            keys = sorted(keys + [(c[0], c[1], c[2], c[3], c[4]) for c in cold if c[0] not in hot],
                          key=lambda k: (k[1], k[2]))
            blobs = {c[0]: (int(c[5]), bytes(c[6])) for c in cold}
    if not keys:
        return SeriesRuns.empty()
    ts, values, counts = _decoded(store, keys, blobs)
    chunk_sids = np.fromiter((k[1] for k in keys), np.int64, len(keys))
    limit = dict(zip(sids.tolist(), below.tolist()))
    chunk_stop = np.fromiter((min(end_ms, limit[k[1]] - 1) for k in keys), np.int64, len(keys))
    keep = (ts >= start_ms) & (ts <= np.repeat(chunk_stop, counts))
    return SeriesRuns.of(np.repeat(chunk_sids, counts)[keep], ts[keep], values[keep])


def _decoded(store: TimeSeriesStore, keys: list[ChunkKey], blobs: dict[int, tuple[int, bytes]]) -> tuple[Int64Array, np.ndarray, Int64Array]:
    """Every chunk's samples back to back in ``keys`` order: cached ones assembled, the others
    read by id and decoded in one batch (and cached)."""
    cache = store.chunk_cache
    entries = cache.lookup(keys)
    miss = [i for i, e in enumerate(entries) if e is None]
    if len(miss) == len(keys):
        decoded = _decode(store, keys, blobs)
        cache.store(keys, decoded.ts, decoded.values, decoded.starts, decoded.counts)
        return decoded.ts, decoded.values, decoded.counts
    hit = [i for i, e in enumerate(entries) if e is not None]
    hit_ts, hit_values, hit_counts = assemble([e for e in entries if e is not None])
    if not miss:
        return hit_ts, hit_values, hit_counts
    missed = [keys[i] for i in miss]
    decoded = _decode(store, missed, blobs)
    cache.store(missed, decoded.ts, decoded.values, decoded.starts, decoded.counts)
    counts = np.empty(len(keys), np.int64)
    hit_rows, miss_rows = np.asarray(hit, np.int64), np.asarray(miss, np.int64)
    counts[hit_rows], counts[miss_rows] = hit_counts, decoded.counts
    at = starts_of(counts)
    ts = np.empty(int(counts.sum()), np.int64)
    values = np.empty(len(ts), np.float64)
    hit_at, miss_at = spread(at[hit_rows], hit_counts), spread(at[miss_rows], decoded.counts)
    ts[hit_at], values[hit_at] = hit_ts, hit_values
    ts[miss_at], values[miss_at] = decoded.ts, decoded.values
    return ts, values, counts


def _decode(store: TimeSeriesStore, keys: list[ChunkKey], blobs: dict[int, tuple[int, bytes]] | None = None) -> DecodedChunks:
    """The chunks of ``keys`` (in that order) decoded together: blobs of the cold tier as given
    (with their encoding), the others read by id."""
    blobs = blobs or {}
    data: dict[int, tuple[int, bytes]] = {k[0]: blobs[k[0]] for k in keys if k[0] in blobs}
    p = store.backend.param
    for group in batches([k[0] for k in keys if k[0] not in blobs]):
        rows = fetch_rows(store, f"SELECT id, encoding, data FROM chunks WHERE id IN ({', '.join([p] * len(group))})", group)
        for cid, encoding, blob in rows:
            data[int(cid)] = (int(encoding), bytes(blob))
    present = [data[k[0]] for k in keys if k[0] in data]
    decoded = decode_many([b for _, b in present], [k[4] for k in keys if k[0] in data], [e for e, _ in present])
    if len(present) == len(keys):
        return decoded
    # a chunk retention deleted between the two reads: read as if it had already been gone
    counts = np.zeros(len(keys), np.int64)
    counts[[i for i, k in enumerate(keys) if k[0] in data]] = decoded.counts
    return DecodedChunks(decoded.ts, decoded.values, starts_of(counts), counts)
