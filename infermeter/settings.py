"""Typed settings: the YAML config file, validated by pydantic.

Durations are written as Prometheus writes them (``15s``, ``5m``, ``2h``, ``7d``, ``500ms``)
and held as integer milliseconds. The composition root loads this once and passes the parts
down; nothing reads settings from a global.
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from alerts.defaults import Thresholds
from alerts.notify.config import NotifyConfig
from alerts.scaling import ScalePolicy
from cost.prices import CostSettings
from dashboard.settings import DashboardSettings
from store.durations import parse_duration_ms
from store.options import StoreOptions
from store.types import LABEL_NAME_RE
from worker.config import WorkerConfig

DurationMs = Annotated[int, BeforeValidator(parse_duration_ms)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    # Request bodies over this many bytes answer 413 (after decompression for gzip bodies).
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    # Bearer token for write endpoints; set it through INFERMETER_API_TOKEN, not the file.
    api_token: str | None = None
    # Reads (queries, alerts, cost) answer without the token unless this is false.
    open_reads: bool = True


class RetentionSettings(_Strict):
    raw: DurationMs = 7 * 86_400_000
    rollup_1m: DurationMs = Field(35 * 86_400_000, alias="1m")
    rollup_1h: DurationMs = Field(400 * 86_400_000, alias="1h")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class StoreSettings(_Strict):
    url: str = "sqlite:///./data/infermeter.db"
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "NORMAL"
    busy_timeout: DurationMs = 10_000
    out_of_order_window: DurationMs = 300_000
    chunk_range: DurationMs = 7_200_000
    head_retain: DurationMs = 3_600_000
    idle_flush: DurationMs = 3_600_000
    checkpoint_grace: DurationMs = 60_000
    retention: RetentionSettings = RetentionSettings()
    maintenance_interval: DurationMs = 30_000
    rollup_cache_rows: int = Field(2_000_000, ge=0)
    max_head_samples: int = Field(10_000_000, ge=1_000)

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
            max_head_samples=self.max_head_samples,
        )


class TargetSettings(_Strict):
    """One job: the same scrape settings for one or more URLs of /metrics endpoints."""

    job: str = Field(min_length=1)
    urls: list[str] = Field(min_length=1)
    interval: DurationMs | None = None
    timeout: DurationMs | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    # Which engine's names to map onto the canonical metrics: auto detects it from the
    # metric names; none stores the raw series only. Raw series are always stored too.
    engine: Literal["auto", "vllm", "sglang", "tgi", "triton", "dcgm", "none"] = "auto"

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parsed = urlsplit(url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError(f"{url!r} is not an http(s) URL with a host")
        return urls

    @field_validator("labels")
    @classmethod
    def _label_names(cls, labels: dict[str, str]) -> dict[str, str]:
        for name in labels:
            if not LABEL_NAME_RE.match(name) or name.startswith("__") or name in ("job", "instance"):
                raise ValueError(f"invalid target label name {name!r}")
        return labels


class ScrapeSettings(_Strict):
    interval: DurationMs = 15_000
    timeout: DurationMs = 10_000
    # Per target: a body over this many bytes (decompressed) or more series than this
    # (0: no limit) fails that scrape with up=0.
    body_limit: int = Field(64 * 1024 * 1024, ge=1024)
    series_limit: int = Field(0, ge=0)
    targets: list[TargetSettings] = Field(default_factory=list)

    @model_validator(mode="after")
    def _timeouts_fit(self) -> ScrapeSettings:
        for target in self.targets:
            interval = target.interval or self.interval
            timeout = target.timeout or self.timeout
            if timeout > interval:
                raise ValueError(f"job {target.job!r}: scrape timeout is longer than its interval")
            if interval <= 0:
                raise ValueError(f"job {target.job!r}: the interval must be positive")
        return self


class NcclSettings(_Strict):
    """NCCL logs, PyTorch watchdog messages, Inspector output and nccl-tests results to follow."""

    paths: list[str] = Field(default_factory=list)  # file globs
    state_file: str = "./data/nccl-state.json"  # read offsets and counters survive restarts
    interval: DurationMs = 15_000


class GpuSettings(_Strict):
    """Local GPUs through NVML. ``auto``: collect when NVML loads, else the target reports up=0
    (once logged) and everything else carries on; ``off``: no GPU target."""

    nvml: Literal["auto", "off"] = "auto"
    interval: DurationMs = 15_000
    per_call_timeout: DurationMs = 2_000
    # Also serve the GPU series on /metrics under dcgm-exporter's names, units and labels,
    # so NVIDIA's Grafana dashboard works unchanged.
    dcgm_names_on_metrics: bool = True
    dcgm_hostname_label: Literal["Hostname", "hostname"] = "Hostname"


class TelemetrySettings(_Strict):
    """OpenTelemetry metrics and traces of the service itself over OTLP/HTTP; off without an endpoint."""

    otlp_endpoint: str | None = None  # e.g. http://127.0.0.1:4318
    export_interval: DurationMs = 15_000
    service_name: str = "infermeter"


class LoggingSettings(_Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class AlertSettings(_Strict):
    # Prometheus-shaped rule files; relative paths are read from the config file's folder.
    rule_files: list[str] = Field(default_factory=list)
    default_rules: bool = True
    thresholds: Thresholds = Thresholds()
    evaluation_interval: DurationMs = 30_000
    # Base of the links in alerts (generatorURL) and notifications.
    external_url: str = "http://127.0.0.1:8000"
    scaling: ScalePolicy = ScalePolicy()


class Settings(_Strict):
    server: ServerSettings = ServerSettings()
    store: StoreSettings = StoreSettings()
    scrape: ScrapeSettings = ScrapeSettings()
    nccl: NcclSettings = NcclSettings()
    gpu: GpuSettings = GpuSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    logging: LoggingSettings = LoggingSettings()
    alerts: AlertSettings = AlertSettings()
    cost: CostSettings = CostSettings()
    notify: NotifyConfig = NotifyConfig()
    # The reference worker (seed 004's fields); `infermeter up` runs it as a child unless
    # worker.embedded is false, and scrapes it as a vLLM server.
    worker: WorkerConfig = WorkerConfig()
    # The Dash dashboard at /dashboard/ on the API's port.
    dashboard: DashboardSettings = DashboardSettings()
