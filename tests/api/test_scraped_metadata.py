"""/api/v1/metadata answers from what the scraped targets' HELP/TYPE/UNIT lines said (two
targets describing one family differently give two entries, as in Prometheus), next to the
canonical set's entries for the names infermeter writes itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from infermeter.settings import GpuSettings, ScrapeSettings, Settings, StoreSettings, TargetSettings
from tests.service import run_app, serve

OPENMETRICS = (
    "# TYPE llm_queue_wait_seconds histogram\n"
    "# HELP llm_queue_wait_seconds Time a request waited in the scheduler queue.\n"
    "# UNIT llm_queue_wait_seconds seconds\n"
    'llm_queue_wait_seconds_bucket{le="0.5"} 3\n'
    'llm_queue_wait_seconds_bucket{le="+Inf"} 5\n'
    "llm_queue_wait_seconds_count 5\n"
    "llm_queue_wait_seconds_sum 1.5\n"
    "# TYPE llm_batches counter\n"
    "# HELP llm_batches Batches run.\n"
    "llm_batches_total 12\n"
    "# EOF\n"
)
TEXT = (
    "# HELP llm_batches Batches the engine ran (older build).\n"
    "# TYPE llm_batches_total counter\n"
    "llm_batches_total 7\n"
    "# HELP llm_free_blocks KV-cache blocks free.\n"
    "llm_free_blocks 42\n"
)


@contextmanager
def _targets() -> Iterator[str]:
    async def om(_: Request) -> Response:
        return PlainTextResponse(OPENMETRICS, headers={"content-type": "application/openmetrics-text; version=1.0.0"})

    async def text(_: Request) -> Response:
        return PlainTextResponse(TEXT, headers={"content-type": "text/plain; version=0.0.4"})

    async def health(_: Request) -> Response:
        return PlainTextResponse("ok")

    with run_app(Starlette(routes=[Route("/om", om), Route("/text", text), Route("/health", health)])) as base:  # type: ignore[arg-type]
        yield base


def test_metadata_comes_from_the_scraped_help_type_and_unit(sqlite_url: str) -> None:
    with _targets() as target:
        settings = Settings(
            store=StoreSettings(url=sqlite_url), gpu=GpuSettings(nvml="off"),
            scrape=ScrapeSettings(interval="300ms", timeout="250ms", targets=[
                TargetSettings(job="om", urls=[f"{target}/om"], engine="none"),
                TargetSettings(job="text", urls=[f"{target}/text"], engine="none"),
            ]),
        )
        with serve(settings) as (base, _):
            deadline = time.monotonic() + 20
            data: dict[str, list[dict[str, str]]] = {}
            while time.monotonic() < deadline:
                data = httpx.get(f"{base}/api/v1/metadata").json()["data"]
                if {"llm_queue_wait_seconds", "llm_batches", "llm_free_blocks"} <= set(data):
                    break
                time.sleep(0.2)
            assert data["llm_queue_wait_seconds"] == [
                {"type": "histogram", "help": "Time a request waited in the scheduler queue.", "unit": "seconds"}]
            assert data["llm_free_blocks"] == [{"type": "unknown", "help": "KV-cache blocks free.", "unit": ""}]
            assert sorted(e["help"] for e in data["llm_batches"]) == ["Batches run.", "Batches the engine ran (older build)."]
            assert {e["type"] for e in data["llm_batches"]} == {"counter", "unknown"}  # 0.0.4 typed the _total name
            assert "up" not in data or data["up"][0]["type"] == "gauge"
            one = httpx.get(f"{base}/api/v1/metadata", params={"metric": "llm_free_blocks"}).json()["data"]
            assert list(one) == ["llm_free_blocks"]
            assert len(httpx.get(f"{base}/api/v1/metadata", params={"limit": "1"}).json()["data"]) == 1
