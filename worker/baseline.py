"""The gentle baseline load ``infermeter up`` drives at its worker (``worker.baseline`` config).

An asyncio task: wait for the worker's health check, then run the load generator in one-minute
windows (closed loop with ``concurrency`` users and ``think_time_ms`` between requests, or
Poisson ``rate``) until stopped.  A failed request makes its user pause at least a second, so a
worker that is down is not hammered.  Failures are data: :attr:`BaselineLoad.status` counts
requests by outcome and cause and keeps the last error and the last window's report; nothing
raises into the caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Literal

import httpx

from worker.config import BaselineLoadConfig, WorkerConfig
from worker.loadgen.client import RequestResult
from worker.loadgen.report import LoadReport
from worker.loadgen.runner import LoadOptions, run_load
from worker.loadgen.workload import LengthDist

log = logging.getLogger("worker.baseline")
BaselineState = Literal["idle", "waiting", "running", "stopped", "error"]


@dataclass(frozen=True)
class BaselineStatus:
    state: BaselineState
    sent: int
    ok: int
    failed: int
    failures: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    last_window: LoadReport | None = None


class BaselineLoad:
    def __init__(
        self, url: str, config: BaselineLoadConfig, *, health_path: str = "/health", model: str | None = None,
        max_context: int = 8192, seed: int = 0, window_s: float = 60.0,
    ) -> None:
        self.url, self.config, self.health_path = url.rstrip("/"), config, health_path
        self.window_s = window_s
        self.options = LoadOptions(
            url=self.url, concurrency=config.concurrency, rate=config.rate,
            prompt=LengthDist.parse(config.prompt_tokens), output=LengthDist.parse(config.output_tokens),
            stream=True, temperature=1.0, ignore_eos=True, model=model, timeout_s=120.0, max_context=max_context,
            think_time_s=config.think_time_ms / 1000, seed=seed, duration_s=window_s, failure_backoff_s=1.0,
        )
        self._state: BaselineState = "idle"
        self._sent = self._ok = 0
        self._failures: dict[str, int] = {}
        self._last_error: str | None = None
        self._last_window: LoadReport | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def for_worker(cls, config: WorkerConfig, *, seed: int = 0, window_s: float = 60.0) -> BaselineLoad:
        """The load ``config.baseline`` describes, aimed at the worker ``config`` describes."""
        return cls(config.url(), config.baseline, health_path=config.health_check_path, model=config.model_name,
                   max_context=config.max_context_length, seed=seed, window_s=window_s)

    @property
    def status(self) -> BaselineStatus:
        return BaselineStatus(self._state, self._sent, self._ok, self._sent - self._ok, dict(self._failures),
                              self._last_error, self._last_window)

    def start(self) -> asyncio.Task[None]:
        """Start in the running event loop (no-op when ``enabled`` is false)."""
        if self._task is None or self._task.done():
            self._stop = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self.run(), name="worker-baseline-load")
        return self._task

    async def stop(self, timeout_s: float = 5.0) -> BaselineStatus:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        self._state = "stopped"
        return self.status

    def _record(self, result: RequestResult) -> None:
        self._sent += 1
        if result.ok:
            self._ok += 1
        else:
            cause = result.cause or "unknown"
            self._failures[cause] = self._failures.get(cause, 0) + 1
            self._last_error = f"{cause}: {result.detail}"[:300]

    async def run(self) -> None:
        if not self.config.enabled:
            self._state = "stopped"
            return
        async with httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(120.0, connect=5.0)) as client:
            if self.config.start_delay_ms and await self._sleep(self.config.start_delay_ms / 1000):
                return
            while not self._stop.is_set():
                try:
                    self._state = "waiting"
                    if not await self._wait_healthy(client):
                        return
                    self._state = "running"
                    self._last_window = await run_load(self.options, stop=self._stop, on_result=self._record,
                                                       client=client)
                except Exception as exc:  # failures are data; try again a little later
                    log.exception("baseline load failed")
                    self._state, self._last_error = "error", f"{type(exc).__name__}: {exc}"
                    if await self._sleep(5.0):
                        return
        self._state = "stopped"

    async def _wait_healthy(self, client: httpx.AsyncClient) -> bool:
        while not self._stop.is_set():
            try:
                if (await client.get(self.health_path, timeout=2.0)).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if await self._sleep(1.0):
                return False
        return False

    async def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopped first; True if stopped."""
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
            return True
        except TimeoutError:
            return False
