"""Decoded chunks of recent reads, kept in memory within a byte budget (least recently used out).

Dashboards ask the same ranges again every refresh: the last hours of the same panels. A chunk
never changes once written (retention only deletes whole chunks), so its decoded samples can be
kept by the chunk's row id and reused; a read then costs the SQL lookup of which chunks it
needs, without zlib or decoding. Entries are compact: timestamps as 32-bit offsets from the
chunk's first (a chunk spans at most its chunk range, hours), values as float32 when that is
exact (utilisation, MiB, watts in whole numbers) and float64 otherwise -- 8 to 12 bytes a sample.

The key holds the row's series, start, end and count besides its id, so an id SQLite hands out
again after the newest chunk was deleted cannot be mistaken for the chunk it once named.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from store.types import Float64Array, Int64Array

ChunkKey = tuple[int, int, int, int, int]  # id, series_id, start_ms, end_ms, n
_ENTRY_OVERHEAD = 500  # bytes of Python objects per entry besides its arrays (measured: key, entry, array headers, dict slot)


@dataclass(slots=True)
class _Entry:
    first_ts: int
    offsets: np.ndarray  # int32, ms after first_ts
    values: np.ndarray  # float32 when exact, else float64

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.values.nbytes) + _ENTRY_OVERHEAD


class ChunkCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[ChunkKey, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def lookup(self, keys: list[ChunkKey]) -> list[_Entry | None]:
        """The entries of ``keys`` (None where absent), each found one marked recently used."""
        if not self.enabled:
            return [None] * len(keys)
        with self._lock:
            entries = self._entries
            found = [entries.get(k) for k in keys]
            for key, entry in zip(keys, found):
                if entry is not None:
                    entries.move_to_end(key)
            hit = sum(e is not None for e in found)
            self.hits += hit
            self.misses += len(keys) - hit
        return found

    def store(self, keys: list[ChunkKey], ts: Int64Array, values: Float64Array, starts: Int64Array,
              counts: Int64Array) -> None:
        """Keep decoded chunks (chunk c owns ``[starts[c], starts[c] + counts[c])``)."""
        kept = np.flatnonzero(counts > 0)  # a chunk deleted while it was read has no samples
        if not self.enabled or not len(kept):
            return
        starts, counts = starts[kept], counts[kept]
        with np.errstate(invalid="ignore", over="ignore"):  # out of float32's range: not exact, kept float64
            narrow = values.astype(np.float32)
        exact = narrow.astype(np.float64).view(np.uint64) == values.view(np.uint64)
        # a chunk is float32 when all its values are: one reduce over chunk boundaries
        all_exact = np.logical_and.reduceat(exact, starts)
        firsts = ts[starts]
        offsets = (ts - np.repeat(firsts, counts)).astype(np.int32)
        new = []
        for c, (a, n, key) in enumerate(zip(starts.tolist(), counts.tolist(), [keys[i] for i in kept.tolist()])):
            vals = narrow[a : a + n] if all_exact[c] else values[a : a + n]
            new.append((key, _Entry(int(firsts[c]), offsets[a : a + n].copy(), vals.copy())))
        with self._lock:
            for key, entry in new:
                old = self._entries.pop(key, None)
                if old is not None:
                    self._bytes -= old.nbytes
                self._entries[key] = entry
                self._bytes += entry.nbytes
            self._evict()

    def resize(self, max_bytes: int) -> None:
        """A new budget, entries beyond it dropped at once (oldest first)."""
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._entries:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.nbytes


def assemble(entries: list[_Entry]) -> tuple[Int64Array, Float64Array, Int64Array]:
    """The entries' samples back to back: (timestamps, values, sample count of each entry)."""
    if not entries:
        return np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64)
    counts = np.fromiter((len(e.offsets) for e in entries), np.int64, len(entries))
    firsts = np.fromiter((e.first_ts for e in entries), np.int64, len(entries))
    ts = np.concatenate([e.offsets for e in entries]).astype(np.int64) + np.repeat(firsts, counts)
    values = np.concatenate([e.values for e in entries]).astype(np.float64, copy=False)
    return ts, values, counts
