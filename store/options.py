"""Tuning of the store, as plain data (the service's settings build one of these)."""

from __future__ import annotations

from dataclasses import dataclass, field

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class StoreOptions:
    # Samples older than a series' newest sample by more than this are rejected ("too old").
    out_of_order_window_ms: int = 5 * MINUTE_MS
    # Chunks are cut at multiples of this (a multiple of every rollup resolution, so that
    # ordinary checkpoints never split a rollup bucket).
    chunk_range_ms: int = 2 * HOUR_MS
    # Flushed samples stay in memory this long, so rules and live panels never touch SQL. A
    # dashboard's "last hour" reads 65 minutes (its first step looks back 5): at one hour, every
    # series of such a query merged chunk reads with the head's (30,000 series: 244 ms a query
    # against 163 with the extra 5 minutes held).
    head_retain_ms: int = HOUR_MS + 5 * MINUTE_MS
    # A series that has received nothing for this long is flushed completely.
    idle_flush_ms: int = HOUR_MS
    # Once a series is due for a checkpoint, wait at most this long for the others to catch
    # up, so one checkpoint serves them all (each rewrites the unflushed tail of the WAL).
    checkpoint_grace_ms: int = MINUTE_MS
    rollup_resolutions_ms: tuple[int, ...] = (MINUTE_MS, HOUR_MS)
    raw_retention_ms: int = 7 * DAY_MS
    rollup_retention_ms: dict[int, int] = field(
        default_factory=lambda: {MINUTE_MS: 35 * DAY_MS, HOUR_MS: 400 * DAY_MS}
    )
    retention_interval_ms: int = 10 * MINUTE_MS
    # When the head holds more samples than this, checkpoint early at a minute boundary and keep
    # only the out-of-order window of flushed samples in memory: a fleet scraped every second
    # would otherwise hold a whole chunk range of raw samples (24 bytes each) in memory.
    max_head_samples: int = 10_000_000
    # Rollup rows of recently read series kept in memory (about 72 bytes a row); 0 disables.
    rollup_cache_rows: int = 2_000_000
    # Decoded chunks of recent reads kept in memory (8-12 bytes a sample); 0 disables.
    chunk_cache_bytes: int = 256 * 1024 * 1024
    # Samples stamped more than this ahead of the store's clock are rejected ("too far in the
    # future"): one sample from a broken clock would otherwise make every real one "too old".
    max_future_ms: int = 10 * MINUTE_MS
    # Active series (written or created within idle_flush_ms) the store takes; a new series
    # beyond it is refused ("series_limit") and its samples with it. 0: no limit.
    max_series: int = 0
    # close(flush=True) checkpoints the whole head (True) or only what is due (False). Everything
    # acknowledged is already in the write-ahead rows either way; a whole head of a fleet
    # scraped every second took longer to encode than a service manager waits for a stop.
    checkpoint_on_close: bool = True
    # PostgreSQL: checkpoints on their own connection and thread, off the append path
    # (store.background). Off here so that a bare store flushes inline and predictably;
    # the service turns it on (store.background_checkpoints).
    background_checkpoints: bool = False
    # The cold tier (store.cold_tier): chunks ending more than cold_after_ms ago move to
    # Parquet files under cold_url (a directory or an fsspec URL); "" keeps everything hot.
    cold_url: str = ""
    cold_after_ms: int = 3 * DAY_MS
    cold_retention_ms: int = 365 * DAY_MS
    cold_interval_ms: int = 10 * MINUTE_MS

    def __post_init__(self) -> None:
        for resolution in self.rollup_resolutions_ms:
            if resolution <= 0 or self.chunk_range_ms % resolution:
                raise ValueError(
                    f"chunk_range_ms ({self.chunk_range_ms}) must be a multiple of every rollup "
                    f"resolution (got {resolution})"
                )
            if resolution not in self.rollup_retention_ms:
                raise ValueError(f"no retention configured for the {resolution} ms rollups")
        if self.out_of_order_window_ms < 0:
            raise ValueError("out_of_order_window_ms must not be negative")
