"""Engines' versions from their own endpoints, over real HTTP on loopback, riding with every scrape
of the target; an upgrade marks the old version stale; a server that answers none of the paths,
or hangs on them, costs nothing but the version."""

from __future__ import annotations

import asyncio
import random

import httpx
import numpy as np
from fastapi import FastAPI, Response

from collector.engine_version import version_from
from collector.http_source import HttpExpositionSource
from collector.scrape_loop import ScrapeLoop, TargetSpec
from store import ManualClock
from store.types import SampleBatch, is_stale_marker
from tests.service import health_app, run_app

METRICS = 'vllm:num_requests_running{model_name="m",engine="0"} 1\n'


def engine_app(kind: str, state: dict[str, str]) -> FastAPI:
    app = health_app()

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(METRICS, media_type="text/plain; version=0.0.4")

    if kind == "vllm":
        @app.get("/version")
        async def version() -> dict[str, str]:
            return {"version": state["version"]}
    elif kind == "sglang":
        @app.get("/get_server_info")
        async def server_info() -> dict[str, object]:
            return {"model_path": "deepseek-ai/DeepSeek-V3", "tp_size": 8, "version": state["version"]}
    elif kind == "hang":
        @app.get("/version")
        async def slow() -> dict[str, str]:
            await asyncio.sleep(2)
            return {"version": "never"}
    return app


def scrape(base: str, engine: str, rounds: int, between: object = None, hangs: bool = False) -> list[SampleBatch]:
    spec = TargetSpec(job="llm", url=f"{base}/metrics", instance=base.split("//")[1], options=(("engine", engine),))
    stored: list[SampleBatch] = []

    async def append(batch: SampleBatch) -> None:
        stored.append(batch)

    async def main() -> None:
        async with httpx.AsyncClient() as client:
            source = HttpExpositionSource(spec.url, client, ManualClock(1_000), engine=engine)
            source.probe.every_s = 0.2  # type: ignore[union-attr]
            source.probe.timeout_s = 0.5  # type: ignore[union-attr]
            loop = ScrapeLoop(spec, source, append, ManualClock(1_000), random.Random(1))
            for i in range(rounds):
                await loop.scrape_once()
                if hangs and i == 0:  # the scrape is back while the probe it started still waits
                    task = source.probe._task  # type: ignore[union-attr]
                    assert task is not None and not task.done()
                if callable(between):
                    between(i)
                await asyncio.sleep(0.3)
            await source.close()

    asyncio.run(main())
    return stored


def _versions(batch: SampleBatch) -> dict[tuple[str, str], bool]:
    """(engine, version) -> whether the sample is live (False: a stale marker)."""
    return {(s.series.get("engine"), s.series.get("version")): not bool(is_stale_marker(np.asarray([s.value]))[0])
            for s in batch.samples() if s.series.name == "node_software_info"}


def test_vllm_and_an_upgrade() -> None:
    state = {"version": "0.10.1"}
    with run_app(engine_app("vllm", state)) as base:
        batches = scrape(base, "auto", 4, lambda i: state.update(version="0.11.0") if i == 1 else None)
    assert _versions(batches[0]) == {}  # learnt in the background: from the next scrape on
    assert _versions(batches[1]) == {("vllm", "0.10.1"): True}
    assert ("vllm", "0.11.0") in _versions(batches[3])
    seen = [_versions(b) for b in batches[2:]]
    assert any(v.get(("vllm", "0.10.1")) is False for v in seen)  # the old version was marked stale once
    up = [s for s in batches[-1].samples() if s.series.name == "up"]
    assert up[0].value == 1.0 and up[0].series.get("job") == "llm"
    info = [s for s in batches[-1].samples() if s.series.name == "node_software_info" and s.value == 1.0]
    assert info[0].series.get("job") == "llm" and info[0].series.get("component") == "engine"


def test_sglang_server_info() -> None:
    with run_app(engine_app("sglang", {"version": "0.5.2"})) as base:
        batches = scrape(base, "sglang", 2)
    assert _versions(batches[1]) == {("sglang", "0.5.2"): True}


def test_servers_without_a_version_or_hanging_cost_only_the_version() -> None:
    for kind in ("none", "hang"):
        with run_app(engine_app(kind, {})) as base:
            batches = scrape(base, "auto", 3, hangs=kind == "hang")
        assert all(_versions(b) == {} for b in batches)
        assert all(s.value == 1.0 for b in batches for s in b.samples() if s.series.name == "up")


def test_version_documents() -> None:
    assert version_from({"version": "0.10.1"}, "vllm") == ("vllm", "0.10.1")
    assert version_from({"version": "0.1.0", "engine": "infermeter-worker"}, "vllm") == ("infermeter-worker", "0.1.0")
    assert version_from({"name": "triton", "version": "2.41.0", "extensions": []}, "triton") == ("triton", "2.41.0")
    assert version_from({"version": ""}, "tgi") is None
    assert version_from(["0.1"], "tgi") is None
