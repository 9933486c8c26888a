"""Which write-ahead rows a checkpoint may delete: each row's id and newest sample time.

A checkpoint used to delete every write-ahead row up to the newest and write the samples of
those rows it did not flush (the carry: at a 2 h boundary, the minutes past it, millions of
samples) into one new row -- copied and sent to the database again at every checkpoint, and
the copy held the interpreter long enough to show in append latency. Instead a row stays
whole until none of its samples is unflushed, and is then deleted.

When is a row wholly flushed? Let ``F[s]`` be series ``s``'s flushed mark once the checkpoint
committed, ``O[s]`` the larger of ``F[s]`` and the oldest sample of ``s`` in the head (so no
unflushed sample of ``s`` is older than ``O[s]``), and ``low`` the smallest ``O[s]`` among
series that still have a sample at or past their mark. A sample ``(s, t)`` of a row whose
newest time is below ``low`` is flushed: if ``s`` has nothing unflushed, every sample of it is;
otherwise ``t < low <= O[s]``, and no unflushed sample of ``s`` is that old. That needs only the
newest time per row, not the row's series, so the ledger costs 16 bytes a row.

A row kept this way may hold samples that are also in chunks. Replay after a restart drops
samples below the marks taken from the chunks (``TimeSeriesStore._replay``), as it always
has, so every sample is still read once.
"""

from __future__ import annotations

import numpy as np


class WalLedger:
    """The write-ahead rows the head holds samples of: ids ascending, each with its newest time."""

    def __init__(self) -> None:
        self._ids = np.empty(1024, np.int64)
        self._newest = np.empty(1024, np.int64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        return int(self._ids.nbytes + self._newest.nbytes)

    def add(self, row_id: int, newest_ts: int) -> None:
        """A row just written. Its id is above every row's in the table, so above every id
        here (rows are written under the store's lock; SQLite reuses only ids above its
        largest), and the ids stay ascending."""
        if self._n == len(self._ids):
            self._ids = np.concatenate([self._ids, np.empty(self._n, np.int64)])
            self._newest = np.concatenate([self._newest, np.empty(self._n, np.int64)])
        self._ids[self._n] = row_id
        self._newest[self._n] = newest_ts
        self._n += 1

    def flushed(self, upto: int, low: int) -> list[tuple[int, int]]:
        """The rows up to ``upto`` whose every sample is below ``low`` (see the module), as
        inclusive ``(first id, last id)`` runs of consecutive ledger rows: every id between a
        run's ends that names a row at all names one of the run's, so a DELETE of the range
        deletes exactly them. Deleted rows are mostly one long prefix: few runs."""
        ids, newest = self._ids[: self._n], self._newest[: self._n]
        mask = np.concatenate([[False], (ids <= upto) & (newest < low), [False]])
        edges = np.flatnonzero(mask[1:] != mask[:-1])
        firsts, lasts = edges[0::2], edges[1::2] - 1
        return list(zip(ids[firsts].tolist(), ids[lasts].tolist()))

    def forget(self, ranges: list[tuple[int, int]]) -> None:
        """Rows a committed checkpoint deleted."""
        if not ranges:
            return
        # Called under the store's lock: one pass, not one per run (ids are ascending).
        ids = self._ids[: self._n]
        firsts, lasts = np.asarray(ranges, np.int64).T
        edges = np.zeros(self._n + 1, np.int64)
        np.add.at(edges, np.searchsorted(ids, firsts, side="left"), 1)
        np.add.at(edges, np.searchsorted(ids, lasts, side="right"), -1)
        gone = np.cumsum(edges[:-1]) > 0
        kept = int((~gone).sum())
        self._ids[:kept] = ids[~gone]
        self._newest[:kept] = self._newest[: self._n][~gone]
        self._n = kept
