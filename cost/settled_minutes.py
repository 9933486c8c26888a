"""Per-minute range reads that remember the minutes that can no longer change.

Why: every minute the cost tick prices the hour in progress and the trailing hour, and reads
the GPU and token series of the whole fleet at a one-minute step for both -- at 100 loopback
targets scraped every second that was an hour of raw head samples per series, twice a
minute, about 6 % of ``infermeter up``'s CPU, while only the newest minute had changed.

:class:`SettledMinutes` stands in front of a reader's :meth:`range` for minute-step queries
with one result per series (what :class:`cost.compute.CostCalculator` asks). A minute is
*settled* once its bucket ended ``settle_ms`` ago: samples older than the store's
out-of-order window are refused, and an agent's late delivery is seconds, not minutes. Settled
minutes are kept, per selector and function, for ``keep_ms``; a read takes what it can from
them and asks the reader only for the rest, which starts at the first minute not kept.

The answer is what the reader gives when asked from ``overlap_ms`` before the range: a
minute's ``avg``, ``last``... depend only on that minute's samples, and its ``increase`` on them
and on the series' newest sample before it in what is read (a counter's increase across a gap
in its samples counts in the minute after the gap). Every read, the first and those of the
newer minutes only, starts ``overlap_ms`` before the minutes it answers, so an increase across
a gap shorter than the overlap always counts, also at the start of the range, where the
reader asked from that start would not see it. Across a longer gap it may not count, as
Prometheus's ``increase`` over a window shorter than the gap does not either. A series first
seen in the newer minutes has no samples in the kept ones (they were read with every series
the selector matched then), so they are NaN for it, as the reader says too.

What it does not see: samples written behind the settle horizon by other means (a backfill
or an import), and series deleted since their minutes were kept (for at most ``keep_ms``).
Whoever must price such minutes reads through the reader itself: the ledger prices a closed
hour that way (:mod:`cost.ledger`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cost.compute import MINUTE_MS, RangeReader
from store.clock import Clock
from store.reader import RangeQuery, SeriesResult
from store.series_index import Selector
from store.types import Float64Array

LabelsKey = tuple[tuple[str, str], ...]
KeptKey = tuple[Selector, str]  # a query's selector and function


@dataclass
class _Kept:
    """Settled minutes [start_ms, end_ms) of one selector and function: a row per series."""

    start_ms: int
    end_ms: int
    rows: dict[LabelsKey, tuple[dict[str, str], Float64Array]] = field(default_factory=dict)


class SettledMinutes:
    """``range`` of ``reader`` with settled minutes kept (see the module doc). Any query that is
    not a minute-step, per-series query from a whole minute goes straight to the reader."""

    def __init__(self, reader: RangeReader, clock: Clock, settle_ms: int, keep_ms: int = 2 * 3_600_000,
                 overlap_ms: int = 5 * MINUTE_MS) -> None:
        if settle_ms < 0 or keep_ms <= 0 or overlap_ms < 0 or overlap_ms % MINUTE_MS:
            raise ValueError(f"settle_ms must be >= 0, keep_ms > 0 and overlap_ms whole minutes >= 0, "
                             f"got {settle_ms}, {keep_ms} and {overlap_ms}")
        self.reader = reader
        self.clock = clock
        self.settle_ms = settle_ms
        self.keep_ms = keep_ms
        self.overlap_ms = overlap_ms
        self._kept: dict[KeptKey, _Kept] = {}
        self.minutes_read = 0  # minutes asked of the reader (per query, not per series)
        self.minutes_kept = 0  # minutes answered from what was kept

    def range(self, query: RangeQuery) -> list[SeriesResult]:
        if query.step_ms != MINUTE_MS or query.by is not None or query.start_ms % MINUTE_MS:
            return self.reader.range(query)
        start = query.start_ms
        end = query.end_ms // MINUTE_MS * MINUTE_MS + MINUTE_MS  # after the last bucket
        key = (query.selector, query.fn)
        kept = self._kept.get(key)
        # Also when the range starts right where the kept minutes end: its series then carry on
        # every kept row, so extending them below needs no case of its own.
        usable = kept is not None and kept.start_ms <= start <= kept.end_ms
        fresh_from = min(kept.end_ms, end) if usable and kept is not None else start
        fresh = self._read(query, fresh_from, end, fresh_from - self.overlap_ms)
        n = (end - start) // MINUTE_MS
        split = (fresh_from - start) // MINUTE_MS
        rows: dict[LabelsKey, tuple[dict[str, str], Float64Array]] = {}
        if usable and kept is not None:
            lo = (start - kept.start_ms) // MINUTE_MS
            for lk, (labels, values) in kept.rows.items():
                row = np.full(n, np.nan)
                row[:split] = values[lo : lo + split]
                rows[lk] = (labels, row)
            self.minutes_kept += split
        for lk, (labels, values) in fresh.items():
            if lk not in rows:
                rows[lk] = (labels, np.full(n, np.nan))
            rows[lk][1][split:] = values
        self._keep(key, start, end, rows)
        stamps = start + np.arange(n, dtype=np.int64) * MINUTE_MS
        return [SeriesResult(labels, stamps, values, "settled") for labels, values in rows.values()]

    def _read(self, query: RangeQuery, start: int, end: int,
              read_from: int) -> dict[LabelsKey, tuple[dict[str, str], Float64Array]]:
        """The reader's minutes [start, end) per series, placed by their stamps, read from
        ``read_from`` (the overlap, see the module doc)."""
        if end <= start:
            return {}
        n = (end - start) // MINUTE_MS
        self.minutes_read += (end - read_from) // MINUTE_MS
        out: dict[LabelsKey, tuple[dict[str, str], Float64Array]] = {}
        for r in self.reader.range(RangeQuery(query.selector, read_from, end - 1, MINUTE_MS, query.fn)):
            row = np.full(n, np.nan)
            at = (np.asarray(r.ts_ms, np.int64) - start) // MINUTE_MS
            inside = (at >= 0) & (at < n)
            row[at[inside]] = np.asarray(r.values, np.float64)[inside]
            out[tuple(sorted(r.labels.items()))] = (r.labels, row)
        return out

    def _keep(self, key: KeptKey, start: int, end: int,
              rows: dict[LabelsKey, tuple[dict[str, str], Float64Array]]) -> None:
        """Keep the settled minutes of an answer for [start, end): appended to what is kept when
        the answer was built on it (it then holds every kept row), else in its place; never more
        than ``keep_ms``."""
        settled = (self.clock.now_ms() - self.settle_ms) // MINUTE_MS * MINUTE_MS
        upto = min(end, settled)
        if upto <= start:
            return
        kept = self._kept.get(key)
        if kept is not None and kept.start_ms <= start <= kept.end_ms and upto > kept.end_ms:
            add_from = (kept.end_ms - start) // MINUTE_MS
            add = (upto - kept.end_ms) // MINUTE_MS
            old = (kept.end_ms - kept.start_ms) // MINUTE_MS
            for lk, (labels, values) in rows.items():
                before = kept.rows[lk][1] if lk in kept.rows else np.full(old, np.nan)
                kept.rows[lk] = (labels, np.concatenate([before, values[add_from : add_from + add]]))
            kept.end_ms = upto
        elif kept is None or not kept.start_ms <= start <= kept.end_ms:
            m = (upto - start) // MINUTE_MS
            kept = _Kept(start, upto, {lk: (labels, values[:m].copy()) for lk, (labels, values) in rows.items()})
            self._kept[key] = kept
        drop = (kept.end_ms - self.keep_ms - kept.start_ms) // MINUTE_MS
        if drop > 0:
            kept.start_ms += drop * MINUTE_MS
            kept.rows = {lk: (labels, values[drop:]) for lk, (labels, values) in kept.rows.items()}
