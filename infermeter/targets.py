"""Which sources the service collects from: built from the settings in one place.

HTTP exposition targets come from ``scrape.targets``; local sources (NCCL logs, and GPUs through
NVML) become targets of their own kind, so they get the same loop, ``up`` series, staleness and
self-metrics as any scraped endpoint.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any
from urllib.parse import urlsplit

import httpx

from collector.manager import SourceFactory
from collector.nccl.source import NcclLogSource
from collector.nvml import NvmlGpuSource
from collector.nvml.attribution import EngineTarget, ProcessTable
from collector.scrape_auth import split_userinfo
from collector.scrape_loop import TargetSpec
from collector.sglang_experts import SglangExpertSource
from collector.source import Source
from infermeter.settings import ScrapeSettings, Settings, TargetSettings
from infermeter.settings_scrape_auth import scrape_auth
from store.clock import Clock


def _local(job: str, url: str, host: str, interval_ms: int, kind: str, options: dict[str, str]) -> TargetSpec:
    """A source on this host: its own job, the host as instance, a timeout within the interval."""
    interval = interval_ms / 1000
    return TargetSpec(
        job=job,
        url=url,
        instance=host,
        interval_s=interval,
        timeout_s=min(interval, 10.0),
        kind=kind,
        options=tuple(sorted(options.items())),
    )


def _http_spec(scrape: ScrapeSettings, target: TargetSettings, url: str) -> TargetSpec:
    """``url``'s credentials, if it has any, go to the spec's auth; never to url or instance."""
    bare, user, password = split_userinfo(url)
    return TargetSpec(
        job=target.job,
        url=bare,
        instance=urlsplit(bare).netloc,
        interval_s=(target.interval or scrape.interval) / 1000,
        timeout_s=(target.timeout or scrape.timeout) / 1000,
        labels=tuple(sorted(target.labels.items())),
        body_limit=scrape.body_limit,
        series_limit=scrape.series_limit,
        options=(("engine", target.engine),),
        gpus=target.gpus_of(url),
        auth=scrape_auth(target.basic_auth, target.authorization, target.tls_config, user, password),
    )


def _expert_spec(target: TargetSettings, url: str) -> TargetSpec:
    """SGLang's expert recorder at ``url``'s server: a target of its own (job ``<job>-experts``, so
    its ``up`` is not the metrics scrape's)."""
    recorder = target.expert_distribution
    assert recorder is not None
    bare, user, password = split_userinfo(url)
    parts = urlsplit(bare)
    options = {"dump_dir": recorder.dump_dir, "model": recorder.model or "", "keep_dumps": str(recorder.keep_dumps)}
    return TargetSpec(
        job=f"{target.job}-experts", url=f"{parts.scheme}://{parts.netloc}", instance=parts.netloc,
        interval_s=recorder.interval / 1000, timeout_s=min(recorder.interval / 1000, 10.0),
        labels=tuple(sorted(target.labels.items())), kind="sglang_experts", options=tuple(sorted(options.items())),
        auth=scrape_auth(target.basic_auth, target.authorization, None, user, password),
    )


def _http_specs(scrape: ScrapeSettings) -> list[TargetSpec]:
    """One target per URL of every job, with the job's settings or the scrape defaults (and one more
    per URL for SGLang's expert recorder where it is configured)."""
    specs = [_http_spec(scrape, target, url) for target in scrape.targets for url in target.urls]
    specs += [_expert_spec(t, url) for t in scrape.targets if t.expert_distribution is not None for url in t.urls]
    return specs


def _local_engines(specs: list[TargetSpec], host: str) -> list[list[object]]:
    """HTTP targets served from this host without configured GPUs: [job, instance, port] for
    the GPU source to match to NVML's running processes."""
    local = {"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", host, host.split(".")[0]}
    out: list[list[object]] = []
    for spec in specs:
        parts = urlsplit(spec.url)
        if spec.kind == "http" and not spec.gpus and parts.hostname in local:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            out.append([spec.job, spec.instance, port])
    return out


def nvidia_device_present() -> bool:
    """Whether this host has an NVIDIA GPU (its driver's device nodes), without importing torch."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def target_specs(settings: Settings, host: str | None = None, gpu_present: bool | None = None) -> list[TargetSpec]:
    """``gpu_present``: whether the embedded worker finds a GPU (None: look at /dev); on CPU its
    target is marked as running on a CPU node, which the cost ledger prices per node-hour."""
    host = host or socket.gethostname()
    specs = _http_specs(settings.scrape)
    nccl, gpu = settings.nccl, settings.gpu
    if nccl.paths:
        options = {"paths": json.dumps(nccl.paths), "state_file": nccl.state_file,
                   "watched": json.dumps(settings.alerts.thresholds.drift_nccl_settings)}
        specs.append(_local("nccl", f"file://{host}/nccl", host, nccl.interval, "nccl", options))
    if settings.worker.embedded:
        worker = settings.worker
        on_gpu = worker.device == "cuda" or (
            worker.device == "auto" and (nvidia_device_present() if gpu_present is None else gpu_present)
        )
        specs.append(
            TargetSpec(
                job="infermeter-worker",
                url=worker.url() + "/metrics",
                instance=urlsplit(worker.url()).netloc,
                interval_s=settings.scrape.interval / 1000,
                timeout_s=settings.scrape.timeout / 1000,
                body_limit=settings.scrape.body_limit,
                series_limit=settings.scrape.series_limit,
                options=(("engine", "vllm"),),
                gpus=() if on_gpu else ("cpu",),
            )
        )
    if gpu.nvml != "off":
        options = {
            "per_call_timeout_s": str(gpu.per_call_timeout / 1000),
            "engine_targets": json.dumps(_local_engines(specs, host)),
        }
        specs.append(_local("gpu", f"nvml://{host}", host, gpu.interval, "nvml", options))
    return specs


def source_factories(
    clock: Clock, nvml_module: Any = None, processes: ProcessTable | None = None
) -> dict[str, SourceFactory]:
    """``nvml_module``: the pynvml module to use (tests hand in a fake; None imports pynvml);
    ``processes``: how engine ports are traced to process ids (None: psutil)."""

    def nccl(spec: TargetSpec) -> Source:
        options = dict(spec.options)
        return NcclLogSource(json.loads(options["paths"]), options["state_file"], clock, host=spec.instance,
                             watched=json.loads(options.get("watched", "[]")))

    def nvml(spec: TargetSpec) -> Source:
        options = dict(spec.options)
        engines = [EngineTarget(str(j), str(i), int(p)) for j, i, p in json.loads(options.get("engine_targets", "[]"))]
        return NvmlGpuSource(
            clock, spec.instance, nvml=nvml_module, per_call_timeout_s=float(options["per_call_timeout_s"]),
            engine_targets=engines, processes=processes,
        )

    def sglang_experts(spec: TargetSpec) -> Source:
        options = dict(spec.options)
        return SglangExpertSource(spec.url, httpx.AsyncClient(), clock, options["dump_dir"], auth=spec.auth,
                                  model=options["model"] or None, keep_dumps=options["keep_dumps"] == "True")

    return {"nccl": nccl, "nvml": nvml, "sglang_experts": sglang_experts}
