"""Flushed rollup rows of recently read series, kept in memory as numpy columns.

Why: a dashboard redraws the same week of the same series every 15 seconds, and turning
hundreds of thousands of SQL rows into Python objects costs far more than the arithmetic
on them. Flushed rollup rows never change except in two rare ways, both handled here:
a bucket that an idle flush started is merged with later samples (that series' entry is
dropped), and retention deletes old rows (every entry is dropped).

An entry holds *every* row of one series at one resolution from ``from_ms`` up to what is
flushed: it is filled from the database with no upper bound, and each checkpoint appends the
rows it writes. Fills race with checkpoints, so the store counts checkpoints (its epoch) and a
fill computed under an older epoch is not kept. Bounded by a row budget, least recently used
entries go first. All methods run under the store's lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from store.rollup import Frame


@dataclass(slots=True)
class _Entry:
    from_ms: int
    frame: Frame


class RollupCache:
    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self.rows = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[int, int], _Entry] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.max_rows > 0

    def lookup(self, resolution: int, sid: int, start_ms: int) -> Frame | None:
        entry = self._entries.get((resolution, sid))
        if entry is None or entry.from_ms > start_ms:
            self.misses += 1
            return None
        self._entries.move_to_end((resolution, sid))
        self.hits += 1
        return entry.frame

    def fill(self, resolution: int, sid: int, from_ms: int, frame: Frame) -> None:
        if len(frame) > self.max_rows:
            return
        self._drop((resolution, sid))
        self._entries[(resolution, sid)] = _Entry(from_ms, frame)
        self.rows += len(frame)
        self._evict()

    def extend(self, resolution: int, rows: Frame) -> None:
        """Append a checkpoint's rows (sorted by series, then bucket) to cached series.

        Walks the smaller side: a background checkpoint calls this for each slice of a few dozen
        series, and listing every cached series each time cost 4 % of `infermeter up`'s CPU."""
        if not self._entries or len(rows) == 0:
            return
        firsts = np.flatnonzero(np.append(True, rows.sid[1:] != rows.sid[:-1]))
        if len(firsts) <= len(self._entries):
            sids = rows.sid[firsts]
            lo, hi = firsts, np.append(firsts[1:], len(rows))
        else:
            sids = np.asarray([sid for (res, sid) in self._entries if res == resolution], np.int64)
            lo = np.searchsorted(rows.sid, sids, side="left")
            hi = np.searchsorted(rows.sid, sids, side="right")
        for sid, a, b in zip(sids.tolist(), lo.tolist(), hi.tolist()):
            entry = self._entries.get((resolution, sid))
            if entry is None or a == b:
                continue
            entry.frame = Frame.concat([entry.frame, rows.window(a, b)])
            self.rows += b - a
        self._evict()

    def invalidate(self, resolution: int, sids: Iterable[int]) -> None:
        for sid in sids:
            self._drop((resolution, int(sid)))

    def clear(self) -> None:
        self._entries.clear()
        self.rows = 0

    def _drop(self, key: tuple[int, int]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.rows -= len(entry.frame)

    def _evict(self) -> None:
        while self.rows > self.max_rows and self._entries:
            _, entry = self._entries.popitem(last=False)
            self.rows -= len(entry.frame)


def split_by_series(frame: Frame, sids: list[int]) -> dict[int, Frame]:
    """Rows sorted by series id, as one frame per id (ids without rows get an empty frame)."""
    order = np.asarray(sids, np.int64)
    lo = np.searchsorted(frame.sid, order, side="left")
    hi = np.searchsorted(frame.sid, order, side="right")
    return {sid: frame.window(a, b) for sid, a, b in zip(sids, lo.tolist(), hi.tolist())}
