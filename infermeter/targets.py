"""Which sources the service collects from: built from the settings in one place.

HTTP exposition targets come from ``scrape.targets``; local sources (NCCL logs, and GPUs through
NVML) become targets of their own kind, so they get the same loop, ``up`` series, staleness and
self-metrics as any scraped endpoint.
"""

from __future__ import annotations

import json
import socket

from collector.manager import SourceFactory
from collector.nccl.source import NcclLogSource
from collector.scrape_loop import TargetSpec
from collector.source import Source
from infermeter.settings import Settings
from store.clock import Clock


def target_specs(settings: Settings, host: str | None = None) -> list[TargetSpec]:
    host = host or socket.gethostname()
    specs = settings.scrape.specs()
    nccl = settings.nccl
    if nccl.paths:
        interval = nccl.interval / 1000
        specs.append(
            TargetSpec(
                job="nccl",
                url=f"file://{host}/nccl",
                instance=host,
                interval_s=interval,
                timeout_s=min(interval, 10.0),
                kind="nccl",
                options=(("paths", json.dumps(nccl.paths)), ("state_file", nccl.state_file)),
            )
        )
    return specs


def source_factories(clock: Clock) -> dict[str, SourceFactory]:
    def nccl(spec: TargetSpec) -> Source:
        options = dict(spec.options)
        return NcclLogSource(json.loads(options["paths"]), options["state_file"], clock)

    return {"nccl": nccl}
