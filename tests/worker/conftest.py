"""Fixtures: reference weights generated once per session, and real workers on loopback ports
(uvicorn in a thread; the drain and supervisor tests start real subprocesses instead)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from worker.config import WorkerConfig


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> None:
    """Tests run ref-tiny, whose steps are far too small to gain from a thread team; on a shared
    2-core machine a second OpenMP thread mostly adds stalls while other work holds the core."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ref-tiny generated once (seed 0) for every test of the session."""
    from worker.weights import ensure_weights, locate_model

    root = tmp_path_factory.mktemp("models")
    ensure_weights(locate_model("ref-tiny", root, 0))
    return root


class ThreadWorker:
    """A worker app served by uvicorn on a thread, on a free loopback port."""

    def __init__(self, config: WorkerConfig, **app_kwargs: Any) -> None:
        import uvicorn

        from worker.api import create_app

        self.config = config
        self.app = create_app(config, **app_kwargs)
        self.service = self.app.state.worker
        self.url = f"http://127.0.0.1:{config.port}"
        self.server = uvicorn.Server(uvicorn.Config(
            self.app, host="127.0.0.1", port=config.port, log_level="warning", access_log=False, lifespan="on",
        ))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, wait_ready: bool = True, timeout_s: float = 60.0) -> ThreadWorker:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("worker server did not start")
            time.sleep(0.02)
        if wait_ready:
            self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.service.runtime.ready:
                return
            if self.service.runtime.state == "failed":
                raise RuntimeError(f"worker failed: {self.service.runtime.error}")
            time.sleep(0.02)
        raise RuntimeError(f"worker not ready: {self.service.runtime.state}")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


WorkerFactory = Callable[..., ThreadWorker]


@pytest.fixture
def make_worker(model_dir: Path) -> Iterator[WorkerFactory]:
    started: list[ThreadWorker] = []

    def factory(wait_ready: bool = True, app_kwargs: dict[str, Any] | None = None, **overrides: Any) -> ThreadWorker:
        fields: dict[str, Any] = {"port": free_port(), "model_dir": str(model_dir), "precision": "fp32", **overrides}
        worker = ThreadWorker(WorkerConfig(**fields), **(app_kwargs or {}))
        started.append(worker)
        return worker.start(wait_ready=wait_ready)

    yield factory
    for worker in started:
        worker.stop()


@pytest.fixture(scope="module")
def worker(model_dir: Path) -> Iterator[ThreadWorker]:
    """One ordinary worker shared by a module's tests (compare metric deltas, not totals)."""
    w = ThreadWorker(WorkerConfig(port=free_port(), model_dir=str(model_dir), precision="fp32"))
    w.start()
    yield w
    w.stop()


@pytest.fixture
def http(worker: ThreadWorker) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker.url, timeout=30.0) as client:
        yield client


def sse_events(text: str) -> list[Any]:
    """The JSON payloads of a server-sent event body, ``"[DONE]"`` as the string."""
    out: list[Any] = []
    for block in text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                payload = line[6:]
                out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out
