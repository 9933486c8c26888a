"""The worker's configuration: the ``worker:`` section of ``infermeter.yaml``.

Seed 004 step 3 names the fields (``model_path``, ``precision``, ``tensor_parallel_size``,
``max_context_length`` 8192, ``max_batch_size`` 32, ``timeout_ms`` 30000, ``port`` 8080,
``health_check_path`` /health); they are flat here rather than nested under ``parallel:`` /
``inference:`` / ``server:`` as in the seed's sketch, because the seed itself says the field
names follow the serving framework.  Everything else (*ours*) has a default, so an empty
section -- or no file at all -- is a working configuration.

This module imports neither torch nor anything else of ours: the service reads it to embed
``WorkerConfig`` in its own settings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_CONFIG = "infermeter.yaml"
ENV_CONFIG = "INFERMETER_CONFIG"

Precision = Literal["auto", "fp32", "bf16", "fp16", "int8", "fp8", "int4"]
# What the reference engine can execute; the rest are for `infermeter plan` only.
SERVABLE_PRECISIONS = ("auto", "fp32", "bf16", "fp16")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())


class BaselineLoadConfig(_Strict):
    """The gentle load ``infermeter up`` drives against its child worker (closed loop)."""

    enabled: bool = Field(True, description="drive the baseline load")
    concurrency: int = Field(
        1, ge=1, le=64, description="virtual users, each sending its next request think_time_ms after the previous answer"
    )
    rate: float | None = Field(
        None, gt=0, description="open-loop Poisson arrivals in requests/s instead of closed-loop users, when set"
    )
    think_time_ms: int = Field(1000, ge=0, description="pause of a virtual user between an answer and its next request")
    prompt_tokens: int = Field(64, ge=1, description="prompt length of each request")
    output_tokens: int = Field(32, ge=1, description="max_tokens of each request")
    start_delay_ms: int = Field(
        0, ge=0, description="wait after the worker's health check first answers 200 before the load starts"
    )


class TracingConfig(_Strict):
    """OpenTelemetry spans per request (queue, prefill, decode)."""

    exporter: Literal["none", "console", "otlp"] = Field("none", description="where the spans go")
    endpoint: str | None = Field(
        None, description="OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces (otlp only)"
    )
    service_name: str = Field("infermeter-worker", description="service.name of the spans")


class MoeModeConfig(_Strict):
    """MoE mode: each layer's FFN split into experts behind a noisy top-k router; the worker then
    exports ``moe_expert_tokens_total{layer,expert}`` (tokens routed per layer and expert)."""

    experts: int = Field(0, ge=0, le=1024, description="experts per layer (must divide the FFN size); 0 = a dense model")
    top_k: int = Field(2, ge=1, le=64, description="experts each token is routed to")
    skew: float = Field(
        0.0, ge=0.0, le=8.0,
        description="routing preference: experts are picked with shares proportional to (rank + 1) ** -skew; "
        "0 = evenly (for tests and demos of expert imbalance)",
    )


class WorkerConfig(_Strict):
    # -- seed 004 step 3 -------------------------------------------------------------------
    model_path: str = Field(
        "ref-tiny",
        description="a reference size (ref-tiny, ref-small, ref-1b, ref-7b: weights generated from `seed` into "
        "model_dir/<name>) or the directory of a Hugging Face-format Llama checkpoint",
    )
    precision: Precision = Field(
        "auto",
        description="auto: bf16 on CUDA, bf16 on CPUs with native bf16 (AVX512-BF16/AMX), else fp32; "
        "int8/fp8/int4 are accepted by `infermeter plan` only",
    )
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="GPUs one model instance is split across")
    max_context_length: int = Field(8192, ge=16, le=1_048_576, description="prompt plus output tokens of one request")
    max_batch_size: int = Field(32, ge=1, le=4096, description="requests decoded together")
    timeout_ms: int = Field(30_000, ge=1, description="a request running longer than this is cut off")
    host: str = Field("127.0.0.1", description="address the worker listens on")
    port: int = Field(8080, ge=1, le=65535, description="port of the worker")
    health_check_path: str = Field("/health", description="path answering 200 once the model is loaded")
    # -- ours ------------------------------------------------------------------------------
    embedded: bool = Field(
        True,
        description="`infermeter up` starts this worker as a child process (false: run `infermeter worker` "
        "yourself, or point the service at another server)",
    )
    served_model_name: str | None = Field(None, description="the model_name label; null: model_path")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda when available, else cpu")
    seed: int = Field(0, ge=0, description="seed of the generated reference weights")
    model_dir: str = Field("./data/models", description="where generated reference weights are cached")
    max_waiting_requests: int = Field(
        256, ge=0, description="requests waiting for a batch slot beyond this answer 429 with Retry-After"
    )
    prefill_chunk_tokens: int = Field(
        256, ge=16,
        description="prompt tokens prefilled per engine iteration before the next decode step (chunked prefill: "
        "a long prompt cannot stall the running requests for long)",
    )
    memory_margin: float = Field(
        0.10, ge=0.0, lt=1.0,
        description="memory kept free beyond weights + KV cache (activations, allocator slack), fraction of "
        "the device's total memory",
    )
    num_threads: int = Field(
        0, ge=0, description="torch intra-op threads on CPU; 0 = auto (1 for tiny models, else all cores but one)"
    )
    drain_timeout_ms: int | None = Field(
        None, ge=0, description="how long a SIGTERM waits for in-flight requests; null: timeout_ms"
    )
    max_tokens_limit: int = Field(
        4096, ge=1, description="the largest max_tokens one request may ask for (also bounded by the context)"
    )
    baseline: BaselineLoadConfig = Field(BaselineLoadConfig(), description=BaselineLoadConfig.__doc__)
    tracing: TracingConfig = Field(TracingConfig(), description=TracingConfig.__doc__)
    moe: MoeModeConfig = Field(MoeModeConfig(), description=MoeModeConfig.__doc__)

    @field_validator("health_check_path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/") or value in ("/metrics", "/v1/generate", "/v1/completions"):
            raise ValueError("must start with / and not shadow /metrics or the API routes")
        return value

    @model_validator(mode="after")
    def _tracing_endpoint(self) -> WorkerConfig:
        if self.tracing.exporter == "otlp" and not self.tracing.endpoint:
            raise ValueError("tracing.exporter otlp needs tracing.endpoint (e.g. http://127.0.0.1:4318/v1/traces)")
        return self

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model_path

    @property
    def drain_ms(self) -> int:
        return self.timeout_ms if self.drain_timeout_ms is None else self.drain_timeout_ms

    def url(self, host: str | None = None) -> str:
        shown = host or ("127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host)
        return f"http://{shown}:{self.port}"


class WorkerConfigError(Exception):
    """A config file that cannot be used; ``problems`` name file, line and field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def resolve_config_path(explicit: str | None, environ: dict[str, str] | None = None) -> tuple[Path, bool]:
    """The file to read and whether it was asked for (a missing default file means defaults)."""
    env = dict(os.environ) if environ is None else environ
    if explicit:
        return Path(explicit), True
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]), True
    return Path(DEFAULT_CONFIG), False


def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Line numbers of the keys under ``worker:`` (best effort, for error messages)."""
    lines: dict[tuple[str, ...], int] = {}
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return lines

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines[(*path, str(key.value))] = key.start_mark.line + 1
                walk(value, (*path, str(key.value)))

    if root is not None:
        walk(root, ())
    return lines


def parse_worker_config(text: str, source: str = "(text)") -> WorkerConfig:
    """The ``worker:`` section of a YAML document; other sections are not looked at."""
    try:
        data: Any = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise WorkerConfigError([f"{source}:{line}: not valid YAML: {exc}"]) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise WorkerConfigError([f"{source}:1: the file must be a mapping of sections"])
    section = data.get("worker") or {}
    if not isinstance(section, dict):
        raise WorkerConfigError([f"{source}: worker: must be a mapping"])
    try:
        return WorkerConfig.model_validate(section)
    except ValidationError as exc:
        lines = _key_lines(text)
        problems = []
        for error in exc.errors():
            loc = ("worker", *(str(p) for p in error["loc"]))
            line = next((lines[loc[:cut]] for cut in range(len(loc), 0, -1) if loc[:cut] in lines), 0)
            problems.append(f"{source}:{line}: {'.'.join(loc)}: {error['msg']}")
        raise WorkerConfigError(problems) from exc


def load_worker_config(path: str | os.PathLike[str] | None = None) -> WorkerConfig:
    """The worker section of ``path``, ``$INFERMETER_CONFIG`` or ``./infermeter.yaml``.

    A missing default file gives the defaults; a file asked for by name that is missing, or
    any invalid content, raises :class:`WorkerConfigError`.
    """
    file, required = resolve_config_path(os.fspath(path) if path is not None else None)
    if not file.exists():
        if required:
            raise WorkerConfigError([f"{file}: no such config file"])
        return WorkerConfig()
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkerConfigError([f"{file}: cannot read: {exc}"]) from exc
    return parse_worker_config(text, str(file))
