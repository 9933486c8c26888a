"""Typed settings: the YAML config file, validated by pydantic.

Durations are written as Prometheus writes them (``15s``, ``5m``, ``2h``, ``7d``, ``500ms``)
and held as integer milliseconds. The composition root loads this once and passes the parts
down; nothing reads settings from a global.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from access.settings import SecuritySettings
from alerts.notify.config import NotifyConfig
from alerts.scale_policy import ScalePolicy
from alerts.thresholds import Thresholds
from cost.prices import CostSettings
from dashboard.settings import DashboardSettings
from infermeter.settings_base import DurationMs, Strict, http_url
from infermeter.settings_fleet import AgentSettings, HaSettings
from infermeter.settings_limits import IngestLimits
from infermeter.settings_scrape_auth import Authorization, BasicAuth, TlsConfig
from infermeter.settings_store import StoreSettings
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
