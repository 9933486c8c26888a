"""Fleet mode's settings: the remote samples engine (``store.remote``), the node agent
(``agent``) and the HA pair (``ha``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from infermeter.settings_base import DurationMs, Strict, http_url


class RemoteEngineSettings(Strict):
    """A Prometheus-compatible engine holding the samples (``store.backend: remote``)."""

    write_url: str = Field(
        "", description="its remote-write endpoint: http://vm:8428/api/v1/write, "
        "http://vminsert:8480/insert/0/prometheus/api/v1/write, http://mimir:8080/api/v1/push",
    )
    query_url: str = Field(
        "", description="the root its Prometheus API is served under (/api/v1/query is appended): http://vm:8428, "
        "http://vmselect:8481/select/0/prometheus, http://mimir:8080/prometheus",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="sent with every write and query (X-Scope-OrgID, Authorization)"
    )
    timeout: DurationMs = Field(30_000, description="one request's time limit")
    external_labels: dict[str, str] = Field(
        default_factory=dict, description="labels added to every series this process writes that lacks them (cluster)"
    )
    queue_dir: str = Field("./data/remote-queue", description="the durable queue of samples not yet acknowledged")
    flush_interval: DurationMs = Field(
        1000, description="how long a queued batch waits for others to go with it in one request (0: send at once)"
    )
    max_queue_bytes: int = Field(
        512 * 1024 * 1024, ge=1024 * 1024, description="past this the oldest queued data is dropped, and counted"
    )

    @field_validator("write_url", "query_url")
    @classmethod
    def _http(cls, url: str) -> str:
        return http_url(url) if url else url


class RemoteWriteSettings(Strict):
    url: str = Field(min_length=1, description="a Prometheus remote-write 1.0 receiver, e.g. http://vm:8428/api/v1/write "
                     "or an infermeter up's http://host:8000/api/v1/write")
    headers: dict[str, str] = Field(default_factory=dict, description="extra request headers (tenant, Authorization)")
    timeout: DurationMs = Field(30_000, description="one request's time limit")

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        return http_url(url)


class AgentSettings(Strict):
    """`infermeter agent`: the collectors of this node, shipped by remote write (no store)."""

    remote_write: list[RemoteWriteSettings] = Field(
        default_factory=list, description="receivers; each gets its own durable queue"
    )
    external_labels: dict[str, str] = Field(
        default_factory=dict,
        description="labels added to every series that lacks them, e.g. cluster; node defaults to the hostname",
    )
    queue_dir: str = Field("./data/agent-queue", description="where the durable queues live (one folder per receiver)")
    flush_interval: DurationMs = Field(
        1000, description="how long a queued scrape waits for others to go with it in one request (0: send at once)"
    )
    max_queue_bytes: int = Field(
        512 * 1024 * 1024, ge=1024 * 1024,
        description="per receiver: past this the oldest queued data is dropped, and counted",
    )
    host: str = Field("127.0.0.1", description="address of the agent's own /health and /metrics")
    port: int = Field(9109, ge=1, le=65535, description="port of the agent's own /health and /metrics")


class HaSettings(Strict):
    """An active/standby pair: two `up` processes on one PostgreSQL (store.url) and one remote
    samples engine (store.backend: remote); one leads (rules, ledger, forecasts, scraping,
    notifications), the other serves the API and dashboard and takes over when it goes."""

    enabled: bool = Field(False, description="take part in a pair (needs a PostgreSQL store.url and store.backend: remote)")
    lease_duration: DurationMs = Field(
        10_000, description="how long the leader's lease lasts unrenewed; the follower leads at most 1.25 x this after "
        "the leader's last renewal (keep 1.25 x this within two alerts.evaluation_interval)")
    name: str = Field("infermeter", min_length=1, description="the pair's lease name (several pairs may share a database)")
    holder: str = Field("", description="this process's name in the lease; empty: <hostname>:<pid>")
