"""Typed settings: the YAML config file, validated by pydantic.

Durations are written as Prometheus writes them (``15s``, ``5m``, ``2h``, ``7d``, ``500ms``)
and held as integer milliseconds. The composition root loads this once and passes the parts
down; nothing reads settings from a global.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator

from access.settings import SecuritySettings
from alerts.notify.config import NotifyConfig
from alerts.scale_policy import ScalePolicy
from alerts.thresholds import Thresholds
from cost.prices import CostSettings
from dashboard.settings import DashboardSettings
from infermeter.settings_base import DurationMs, Strict, http_url
from infermeter.settings_fleet import AgentSettings, HaSettings, RemoteEngineSettings
from infermeter.settings_limits import IngestLimits
from infermeter.settings_scrape_auth import Authorization, BasicAuth, TlsConfig
from store.options import StoreOptions
from store.types import LABEL_NAME_RE
from worker.config import WorkerConfig


class ServerSettings(Strict):
    host: str = Field("127.0.0.1", description="address the HTTP API listens on (INFERMETER_HOST overrides it)")
    port: int = Field(8000, ge=1, le=65535, description="port of the HTTP API (INFERMETER_PORT overrides it)")
    max_body_bytes: int = Field(
        16 * 1024 * 1024, ge=1024,
        description="request bodies over this many bytes answer 413 (after decompression for gzip bodies)",
    )
    api_token: str | None = Field(
        None, description="bearer token for write endpoints; set it through INFERMETER_API_TOKEN, not the file"
    )
    open_reads: bool = Field(
        True, description="reads (queries, alerts, cost, the dashboard) answer without a token unless this is false"
    )
    ingest: IngestLimits = Field(IngestLimits(), description=IngestLimits.__doc__)
    tls_cert_file: str | None = Field(None, description="serve HTTPS with this PEM certificate (chain) file")
    tls_key_file: str | None = Field(None, description="the private key of tls_cert_file (PEM)")

    @model_validator(mode="after")
    def _tls_pair(self) -> ServerSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        return self


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
        3_600_000, description="flushed samples stay in memory this long for rules and live panels"
    )
    idle_flush: DurationMs = Field(
        3_600_000, description="a series that received nothing for this long is flushed completely"
    )
    checkpoint_grace: DurationMs = Field(
        60_000, description="once some series are due for a checkpoint, wait at most this long for the rest"
    )
    background_checkpoints: bool = Field(
        True, description="PostgreSQL: checkpoints write chunks and rollups on their own connection and thread, so "
        "appends never wait for them (SQLite has one writer: there they stay inline)",
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
            cold_url=self.cold_tier.url,
            cold_after_ms=self.cold_tier.after,
            cold_retention_ms=self.cold_tier.retention,
            cold_interval_ms=self.cold_tier.interval,
        )


class ExpertDistributionSettings(Strict):
    """SGLang's expert distribution recorder (the server started with
    --expert-distribution-recorder-mode stat): dumped every interval and read from dump_dir, giving
    moe_expert_tokens_total{model,layer,expert} under the job <job>-experts."""

    dump_dir: str = Field(
        "/tmp", description="SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR of the server, as seen from here (the agent on "
        "the SGLang node, or a shared volume)")
    interval: DurationMs = Field(60_000, description="how often the recorder is dumped and read")
    model: str | None = Field(None, description="the model label; null: the server's served_model_name")
    keep_dumps: bool = Field(False, description="leave the dump files in place (default: delete each once read)")


class TargetSettings(Strict):
    """One job: the same scrape settings for one or more URLs of /metrics endpoints."""

    job: str = Field(min_length=1, description="the job label of every series scraped from these URLs")
    urls: list[str] = Field(min_length=1, description="http(s) URLs of Prometheus text /metrics endpoints")
    interval: DurationMs | None = Field(None, description="scrape interval of this job; null: scrape.interval")
    timeout: DurationMs | None = Field(None, description="scrape timeout of this job; null: scrape.timeout")
    labels: dict[str, str] = Field(default_factory=dict, description="extra labels added to every series of the job")
    engine: Literal["auto", "vllm", "sglang", "tgi", "triton", "dcgm", "none"] = Field(
        "auto",
        description="which engine's names to map onto the canonical metrics: auto detects it from the metric "
        "names; none stores the raw series only (raw series are always stored too)",
    )
    gpus: dict[str, list[str]] = Field(
        default_factory=dict,
        description="which GPUs each URL's engine runs on, by URL or host:port, as GPU indices or UUIDs on "
        "that target's host: per-GPU tokens/s is then the engine's tokens/s over its own GPUs, and its GPUs' "
        "cost goes to its model. Without it, engines on a host where infermeter reads NVML are matched to "
        "GPUs by their processes; otherwise a node's tokens are spread over all its GPUs",
    )

    basic_auth: BasicAuth | None = Field(None, description="username and password (or password_file)")
    authorization: Authorization | None = Field(
        None, description="an Authorization header: type (Bearer) and credentials or credentials_file"
    )
    tls_config: TlsConfig | None = Field(None, description="CA, client certificate and server name for https")
    expert_distribution: ExpertDistributionSettings | None = Field(
        None, description="SGLang only: also read its expert distribution recorder (MoE routing counts)")

    @model_validator(mode="after")
    def _one_auth(self) -> TargetSettings:
        if self.basic_auth is not None and self.authorization is not None:
            raise ValueError("basic_auth and authorization are mutually exclusive")
        return self

    @model_validator(mode="after")
    def _gpus_name_urls(self) -> TargetSettings:
        known = {u for url in self.urls for u in (url, urlsplit(url).netloc)}
        for key, gpus in self.gpus.items():
            if key not in known:
                raise ValueError(f"gpus: {key!r} is neither one of this job's urls nor its host:port")
            if not gpus or any(not g.strip() for g in gpus):
                raise ValueError(f"gpus: {key!r} needs a non-empty list of GPU indices or UUIDs")
        return self

    def gpus_of(self, url: str) -> tuple[str, ...]:
        return tuple(self.gpus.get(url) or self.gpus.get(urlsplit(url).netloc) or ())

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        return [http_url(url) for url in urls]

    @field_validator("labels")
    @classmethod
    def _label_names(cls, labels: dict[str, str]) -> dict[str, str]:
        for name in labels:
            if not LABEL_NAME_RE.match(name) or name.startswith("__") or name in ("job", "instance"):
                raise ValueError(f"invalid target label name {name!r}")
        return labels


class ScrapeSettings(Strict):
    interval: DurationMs = Field(15_000, description="default scrape interval of every target")
    timeout: DurationMs = Field(10_000, description="default scrape timeout of every target")
    body_limit: int = Field(
        64 * 1024 * 1024, ge=1024,
        description="per target: a body over this many bytes (decompressed) fails that scrape with up=0",
    )
    series_limit: int = Field(
        0, ge=0, description="per target: more series than this fails that scrape with up=0 (0: no limit)"
    )
    targets: list[TargetSettings] = Field(
        default_factory=list,
        description="Prometheus text endpoints to scrape (vLLM, SGLang, TGI, Triton, dcgm-exporter, ...); every "
        "series gets job and instance labels; reload without a restart: kill -HUP <pid> or POST /-/reload",
    )

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


class NcclSettings(Strict):
    """NCCL logs, PyTorch watchdog messages, Inspector output and nccl-tests results to follow."""

    paths: list[str] = Field(
        default_factory=list,
        description="file globs of NCCL_DEBUG logs, watchdog messages, Inspector JSON lines and *.prom files, "
        "and nccl-tests output; empty: off",
    )
    state_file: str = Field(
        "./data/nccl-state.json", description="read offsets and counters, so that they survive restarts"
    )
    interval: DurationMs = Field(15_000, description="how often the files are read")


class GpuSettings(Strict):
    """Local GPUs through NVML. ``auto``: collect when NVML loads, else the target reports up=0
    (once logged) and everything else carries on; ``off``: no GPU target."""

    nvml: Literal["auto", "off"] = Field(
        "auto", description="auto: collect when the NVML library loads (else the gpu target reports up=0); off: no GPU target"
    )
    interval: DurationMs = Field(15_000, description="how often the GPUs are read")
    per_call_timeout: DurationMs = Field(2_000, description="limit of one NVML call")
    dcgm_names_on_metrics: bool = Field(
        True,
        description="also serve the GPU series on /metrics under dcgm-exporter's names, units and labels, "
        "so NVIDIA's Grafana dashboard works unchanged",
    )
    dcgm_hostname_label: Literal["Hostname", "hostname"] = Field(
        "Hostname", description="the host label's name on those series (hostname for newer exporters)"
    )


class TelemetrySettings(Strict):
    """OpenTelemetry metrics and traces of the service itself over OTLP/HTTP; off without an endpoint."""

    otlp_endpoint: str | None = Field(None, description="OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318; null: off")
    export_interval: DurationMs = Field(15_000, description="how often metrics are exported")
    service_name: str = Field("infermeter", description="service.name of the exported telemetry")


class LoggingSettings(Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="the lowest level logged")


class AlertSettings(Strict):
    rule_files: list[str] = Field(
        default_factory=list,
        description="Prometheus-shaped rule files; relative paths are read from the config file's folder "
        "(`infermeter rules check FILE` reports problems as file:line:column)",
    )
    default_rules: bool = Field(True, description="evaluate the default rule pack (see README \"Alerts\")")
    thresholds: Thresholds = Field(Thresholds(), description="the thresholds of the default rule pack")
    evaluation_interval: DurationMs = Field(30_000, description="how often the rules are evaluated")
    external_url: str = Field(
        "http://127.0.0.1:8000", description="base of the links in alerts (generatorURL) and notifications"
    )
    scaling: ScalePolicy = Field(ScalePolicy(), description="scale-out/in recommendations")


class QuerySettings(Strict):
    """PromQL queries over the HTTP API (/api/v1/query, query_range), as Prometheus's flags."""

    lookback_delta: DurationMs = Field(
        300_000, description="how far back an instant selector looks for a sample (Prometheus --query.lookback-delta)"
    )
    timeout: DurationMs = Field(120_000, description="longest a query may run; a request's timeout= may only lower it")
    subquery_step: DurationMs = Field(
        60_000, description="the step of a subquery written without one, x[5m:] (Prometheus: the evaluation interval)"
    )
    max_samples: int = Field(
        50_000_000, ge=1,
        description="most samples (or rows x steps of an intermediate result) one part of a range query may hold at once; "
                    "beyond it the query fails with 422 (as Prometheus --query.max-samples)",
    )


class Settings(Strict):
    server: ServerSettings = Field(ServerSettings(), description="the HTTP API")
    query: QuerySettings = Field(QuerySettings(), description=QuerySettings.__doc__)
    agent: AgentSettings = Field(AgentSettings(), description=AgentSettings.__doc__)
    store: StoreSettings = Field(StoreSettings(), description="where and how samples are stored")
    scrape: ScrapeSettings = Field(ScrapeSettings(), description="Prometheus endpoints to scrape")
    nccl: NcclSettings = Field(NcclSettings(), description=NcclSettings.__doc__)
    gpu: GpuSettings = Field(GpuSettings(), description="local GPUs through NVML (nvidia-ml-py)")
    telemetry: TelemetrySettings = Field(TelemetrySettings(), description=TelemetrySettings.__doc__)
    logging: LoggingSettings = Field(LoggingSettings(), description="the service's own log")
    alerts: AlertSettings = Field(AlertSettings(), description="alerting rules and their evaluation")
    cost: CostSettings = Field(CostSettings(), description="the price book and budgets")
    notify: NotifyConfig = Field(
        NotifyConfig(), description="notifications, shaped like Alertmanager's route / receivers / inhibit_rules"
    )
    worker: WorkerConfig = Field(
        WorkerConfig(),
        description="the reference worker (seed 004's fields); `infermeter up` runs it as a child unless "
        "worker.embedded is false, and scrapes it as a vLLM server",
    )
    dashboard: DashboardSettings = Field(
        DashboardSettings(), description="the Dash dashboard at /dashboard/ on the API's port"
    )
    ha: HaSettings = Field(HaSettings(), description=HaSettings.__doc__)
    security: SecuritySettings = Field(SecuritySettings(), description=SecuritySettings.__doc__)

    @model_validator(mode="after")
    def _pair_needs_shared_state(self) -> Settings:
        if not self.ha.enabled:
            return self
        if not self.store.url.startswith("postgresql"):
            raise ValueError(
                "ha.enabled needs a PostgreSQL store.url shared by both processes (alert state, outbox and the "
                f"lease live there); got {self.store.url.split('://')[0]}://"
            )
        if self.store.backend != "remote":
            raise ValueError(
                "ha.enabled needs store.backend: remote (a Prometheus-compatible engine both processes read and "
                "write): the embedded store keeps its newest samples in its own process, so a pair cannot share it"
            )
        if self.ha.lease_duration * 5 // 4 > 2 * self.alerts.evaluation_interval:
            raise ValueError(
                f"ha.lease_duration {self.ha.lease_duration} ms: a takeover can take 1.25 x that, more than two "
                f"alerts.evaluation_interval ({self.alerts.evaluation_interval} ms); shorten the lease"
            )
        return self
