"""The ``store:`` section of the settings: where samples live, how long, and how the embedded
store cuts, caches and checkpoints them (turned into :class:`store.options.StoreOptions`)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from infermeter.settings_base import DurationMs, Strict
from infermeter.settings_fleet import RemoteEngineSettings
from store.options import StoreOptions


class RetentionSettings(Strict):
    raw: DurationMs = Field(7 * 86_400_000, description="how long raw samples are kept")
    rollup_1m: DurationMs = Field(35 * 86_400_000, alias="1m", description="how long 1-minute rollups are kept")
    rollup_1h: DurationMs = Field(400 * 86_400_000, alias="1h", description="how long 1-hour rollups are kept")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ColdTierSettings(Strict):
    """Raw chunks older than `after` move to Parquet files at `url`; reads of old ranges read them
    back. Off while `url` is empty. With it on, retention.raw no longer deletes raw chunks: they
    move, and the cold tier keeps them for `retention`."""

    url: str = Field("", description="a directory (./data/cold) or an fsspec URL (s3://bucket/prefix with s3fs installed)")
    after: DurationMs = Field(3 * 86_400_000, description="chunks whose newest sample is older than this move to the cold tier")
    retention: DurationMs = Field(365 * 86_400_000, description="how long the cold tier keeps a file (by its newest sample)")
    interval: DurationMs = Field(600_000, description="how often due chunks are moved")


class StoreSettings(Strict):
    backend: Literal["embedded", "remote"] = Field(
        "embedded", description="embedded: samples in the database at url; remote: samples in the engine at "
        "store.remote (url then holds only alerts, outbox, prices, ledger and forecasts)",
    )
    remote: RemoteEngineSettings = Field(RemoteEngineSettings(), description=RemoteEngineSettings.__doc__)
    url: str = Field(
        "sqlite:///./data/infermeter.db",
        description="SQLite file (created on first start) or PostgreSQL through psycopg 3, "
        "e.g. postgresql+psycopg://infermeter@db:5432/infermeter (INFERMETER_STORE_URL overrides it)",
    )
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = Field(
        "NORMAL", description="SQLite durability: NORMAL survives a killed process; FULL also survives power loss"
    )
    busy_timeout: DurationMs = Field(10_000, description="how long a write waits for a locked SQLite database")
    out_of_order_window: DurationMs = Field(
        300_000, description="samples older than a series' newest sample by more than this are rejected (too_old)"
    )
    chunk_range: DurationMs = Field(
        7_200_000, description="head samples are cut into compressed chunks at multiples of this (whole hours)"
    )
    head_retain: DurationMs = Field(
        3_900_000, description="flushed samples stay in memory this long for rules and live panels (a dashboard's"
        " last hour reads 5 minutes more: the lookback of its first step)"
    )
    idle_flush: DurationMs = Field(
        3_600_000, description="a series that received nothing for this long is flushed completely"
    )
    checkpoint_grace: DurationMs = Field(
        60_000, description="once some series are due for a checkpoint, wait at most this long for the rest"
    )
    background_checkpoints: bool = Field(
        True, description="checkpoints write chunks and rollups on their own connection and thread, so appends do "
        "not wait for them (SQLite has one writer: there each slice of about 5,000 samples commits on its own, and an "
        "append waits for one slice at most)",
    )
    checkpoint_on_stop: bool = Field(
        False, description="a stop writes the whole head to chunks; off, it writes what is due and the rest stays in "
        "the write-ahead rows (durable already) and is replayed at the next start, as Prometheus leaves its head to "
        "WAL replay: a head of 100 k series scraped every second took longer to encode than systemd or Kubernetes "
        "wait for a stop",
    )
    retention: RetentionSettings = Field(RetentionSettings(), description="how long each resolution is kept")
    cold_tier: ColdTierSettings = Field(ColdTierSettings(), description=ColdTierSettings.__doc__)
    maintenance_interval: DurationMs = Field(30_000, description="idle flushes and retention run this often")
    rollup_cache_rows: int = Field(
        2_000_000, ge=0,
        description="rollup rows of recently read series kept in memory (~72 bytes each) so dashboards that "
        "redraw the same range do not re-read SQL; 0 turns the cache off",
    )
    chunk_cache_mb: int = Field(
        256, ge=0,
        description="decoded chunks of recent reads kept in memory (8-12 bytes a sample, least recently used out) "
        "so a panel redrawing the last hours does not decompress them again; 0 turns the cache off",
    )
    max_head_samples: int = Field(
        10_000_000, ge=1_000,
        description="above this many samples in memory (about 24 bytes each), checkpoint early at a minute "
        "boundary instead of waiting for the chunk range",
    )

    max_future: DurationMs = Field(
        600_000, description="samples stamped further than this ahead of the clock are rejected (too_far_in_future)"
    )
    max_series: int = Field(
        1_000_000, ge=0,
        description="active series (written or created within idle_flush) the embedded store takes; new series "
        "beyond it are refused with their samples (series_limit, a 422 naming the limit on push); 0: no limit",
    )

    @field_validator("url")
    @classmethod
    def _known_backend(cls, url: str) -> str:
        if not (url.startswith("sqlite://") or url.startswith("postgresql")):
            raise ValueError("use sqlite:///path/to/file.db or postgresql+psycopg://user@host:5432/db")
        return url

    @model_validator(mode="after")
    def _chunk_range_fits_rollups(self) -> StoreSettings:
        if self.chunk_range % 3_600_000:
            raise ValueError("chunk_range must be a whole number of hours (rollups are cut at 1m and 1h)")
        return self

    @model_validator(mode="after")
    def _remote_has_urls(self) -> StoreSettings:
        if self.backend == "remote":
            missing = [name for name in ("write_url", "query_url") if not getattr(self.remote, name)]
            if missing:
                raise ValueError(f"backend remote needs store.remote.{' and store.remote.'.join(missing)}")
        return self

    def options(self) -> StoreOptions:
        return StoreOptions(
            out_of_order_window_ms=self.out_of_order_window,
            chunk_range_ms=self.chunk_range,
            head_retain_ms=self.head_retain,
            idle_flush_ms=self.idle_flush,
            checkpoint_grace_ms=self.checkpoint_grace,
            raw_retention_ms=self.retention.raw,
            rollup_retention_ms={60_000: self.retention.rollup_1m, 3_600_000: self.retention.rollup_1h},
            rollup_cache_rows=self.rollup_cache_rows,
            chunk_cache_bytes=self.chunk_cache_mb * 1024 * 1024,
            max_head_samples=self.max_head_samples,
            max_future_ms=self.max_future,
            max_series=self.max_series,
            background_checkpoints=self.background_checkpoints,
            checkpoint_on_close=self.checkpoint_on_stop,
            cold_url=self.cold_tier.url,
            cold_after_ms=self.cold_tier.after,
            cold_retention_ms=self.cold_tier.retention,
            cold_interval_ms=self.cold_tier.interval,
        )
