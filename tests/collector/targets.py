"""Real HTTP scrape targets on loopback: healthy, hung, dripping, huge, malformed, flaky."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.service import free_port


class TargetState:
    def __init__(self) -> None:
        self.healthy_hits: list[float] = []
        self.flaky_up = True
        self.counter = 0


def build_app(state: TargetState) -> Starlette:
    async def healthy(_: Request) -> Response:
        state.healthy_hits.append(time.monotonic())
        state.counter += 1
        body = (
            "# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{model_name="m"} 3\n'
            "# TYPE vllm:generation_tokens counter\n"
            f'vllm:generation_tokens_total{{model_name="m"}} {state.counter * 100}\n'
        )
        return PlainTextResponse(body, headers={"content-type": "text/plain; version=0.0.4"})

    async def hang(_: Request) -> Response:
        await asyncio.sleep(3600)
        return PlainTextResponse("")

    async def drip(_: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(3600):
                yield b"#"
                await asyncio.sleep(1)

        return StreamingResponse(body(), media_type="text/plain")

    async def huge(_: Request) -> Response:
        chunk = (b"# padding " + b"x" * 1000 + b"\n") * 1000  # ~1 MB of comments

        async def body() -> AsyncIterator[bytes]:
            for _ in range(200):
                yield chunk

        return StreamingResponse(body(), media_type="text/plain")

    async def malformed(_: Request) -> Response:
        lines = []
        for i in range(10_000):
            lines.append(f'good_metric{{i="{i}"}} {i}')
            lines.append(f'bad_metric{{i="{i}"}} not-a-number')
        return PlainTextResponse("\n".join(lines) + "\n")

    async def flaky(_: Request) -> Response:
        if not state.flaky_up:
            return PlainTextResponse("down for maintenance", status_code=503)
        return PlainTextResponse('flaky_value{kind="x"} 1\n')

    return Starlette(
        routes=[
            Route("/healthy", healthy),
            Route("/hang", hang),
            Route("/drip", drip),
            Route("/huge", huge),
            Route("/malformed", malformed),
            Route("/flaky", flaky),
        ]
    )


@contextmanager
def serve_targets(port: int | None = None) -> Iterator[tuple[str, TargetState]]:
    state = TargetState()
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(state), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        server.should_exit = True
        server.force_exit = True
        thread.join(10)
