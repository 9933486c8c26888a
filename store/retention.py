"""Retention: drop raw chunks and rollup spans older than their resolution's window (raw chunks
only without a cold tier: with one they move there, and its own retention drops them)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.tsdb import TimeSeriesStore

log = logging.getLogger(__name__)


def apply_retention(store: TimeSeriesStore, now_ms: int) -> dict[str, int]:
    """Delete what has aged out; returns rows deleted per kind. Runs under the store lock."""
    opts = store.options
    p = store.backend.param
    deleted: dict[str, int] = {}
    with store.transaction() as cur:
        if store.cold is None:  # with a cold tier, raw chunks move there instead (store.cold_tier)
            cur.execute(f"DELETE FROM chunks WHERE end_ms < {p}", (now_ms - opts.raw_retention_ms,))
            deleted["chunks"] = max(cur.rowcount, 0)
        for resolution in opts.rollup_resolutions_ms:
            horizon = now_ms - opts.rollup_retention_ms[resolution]
            # Whole spans only: a span's older buckets stay until its newest is out too (at
            # most a chunk range); reads never go past retention (store.reader's tier choice).
            cur.execute(
                f"DELETE FROM rollup_spans WHERE resolution_ms = {p} AND last_ms <= {p}",
                (resolution, horizon - resolution),
            )
            deleted[f"rollups_{resolution}"] = max(cur.rowcount, 0)
    if any(deleted.values()):
        store.rollup_cache.clear()
        store.flush_epoch += 1
        log.info("retention removed %s", deleted)
    return deleted
