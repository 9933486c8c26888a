"""Run the real service in-process on a loopback port (uvicorn in a thread)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI

from infermeter.api import create_app
from infermeter.runtime import Runtime, build_runtime
from infermeter.settings import Settings
from store.clock import Clock


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen[str] | None = None) -> None:
    """Until ``url`` answers 200; fails at once when ``proc`` (the server) has exited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"exited {proc.returncode} before {url} answered:\n{out[-3000:]}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer 200 within {timeout_s} s")


def health_app() -> FastAPI:
    """An app answering ``GET /health`` (what :func:`run_app` waits for); tests add their routes."""
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve(
    settings: Settings,
    clock: Clock | None = None,
    config_path: str | None = None,
    nvml_module: object = None,
    embedded_worker: bool = False,
) -> Iterator[tuple[str, Runtime]]:
    """``embedded_worker``: keep the reference worker child (off by default: most tests test
    other parts and a torch process per test would cost seconds of CPU each)."""
    if not embedded_worker:
        settings = settings.model_copy(update={"worker": settings.worker.model_copy(update={"embedded": False})})
    runtime = build_runtime(settings, clock, config_path=config_path, nvml_module=nvml_module)
    with run_app(create_app(runtime)) as base:
        yield base, runtime


@contextmanager
def run_app(app: FastAPI, startup_s: float = 30.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn (lifespan on) in a thread on a free loopback port until
    ``/health`` answers; yields the base URL and shuts the server down after."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    else:
        raise RuntimeError("service did not start")
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(30)
