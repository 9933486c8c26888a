"""The worker as a supervised child process, for ``infermeter up``.

``WorkerChild`` runs ``python -m worker --config <tmp.yaml> serve`` (the exact
:class:`WorkerConfig` it was given, written to a private temporary file), waits for the health
path to answer 200, and keeps it running from a **supervisor thread** (not an asyncio task, so
it works the same from sync and async callers and a busy event loop cannot starve it):

* the process exits -> restart after a backoff (1 s doubling to 60 s, reset once healthy);
* it never becomes healthy within ``health_timeout_s``, or stops answering the health check
  for ``unhealthy_restart_s`` -> killed and restarted the same way;
* it exits with 78 (refused to start: memory plan, manifest, precision) -> ``failed``, no restart
  (the same config would be refused again).

``stop()`` sends SIGTERM (the worker drains in-flight requests) and SIGKILL after the grace
period.  Failures are data: :attr:`status` says what happened, including the last lines the
child printed; nothing raises into the caller.  Child output goes to the ``worker.child`` logger.

``BaselineLoad`` (re-exported from :mod:`worker.baseline`) is the gentle load to drive at it;
``EmbeddedWorker`` bundles both for the service's lifespan (``await start()`` / ``await stop()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal

import httpx
import yaml

from worker.baseline import BaselineLoad, BaselineStatus
from worker.config import WorkerConfig

__all__ = ["BaselineLoad", "BaselineStatus", "ChildState", "ChildStatus", "EmbeddedWorker", "WorkerChild"]

log = logging.getLogger("worker.child")
EXIT_REFUSED = 78
ChildState = Literal["stopped", "starting", "healthy", "unhealthy", "backoff", "failed"]


@dataclass(frozen=True)
class ChildStatus:
    state: ChildState
    url: str
    pid: int | None
    restarts: int
    last_exit: int | None
    error: str | None
    output_tail: tuple[str, ...]


class WorkerChild:
    def __init__(
        self,
        config: WorkerConfig,
        *,
        python: str = sys.executable,
        health_timeout_s: float = 300.0,
        unhealthy_restart_s: float = 60.0,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        grace_s: float | None = None,
        poll_s: float = 0.25,
        health_interval_s: float = 5.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.url = config.url()
        self.python, self.env, self.cwd, self.clock = python, env, cwd, clock
        self.health_timeout_s, self.unhealthy_restart_s = health_timeout_s, unhealthy_restart_s
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self.grace_s = grace_s if grace_s is not None else config.drain_ms / 1000 + 5.0
        self.poll_s, self.health_interval_s = poll_s, health_interval_s
        self._state: ChildState = "stopped"
        self._proc: subprocess.Popen[bytes] | None = None
        self._restarts = 0
        self._last_exit: int | None = None
        self._error: str | None = None
        self._tail: deque[str] = deque(maxlen=40)
        self._stop = threading.Event()
        self._healthy = threading.Event()
        self._thread: threading.Thread | None = None
        self._config_file: str | None = None
        self._lock = threading.Lock()

    # -- public -------------------------------------------------------------------------------
    @property
    def status(self) -> ChildStatus:
        proc = self._proc
        return ChildStatus(
            self._state, self.url, proc.pid if proc is not None and proc.poll() is None else None,
            self._restarts, self._last_exit, self._error, tuple(self._tail),
        )

    def start(self) -> None:
        """Start supervising (returns at once; see :meth:`wait_healthy`)."""
        if self._thread is not None and self._thread.is_alive():
            return
        fd, path = tempfile.mkstemp(prefix="infermeter-worker-", suffix=".yaml")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yaml.safe_dump({"worker": self.config.model_dump(mode="json")}, fh, sort_keys=False)
        self._config_file = path
        self._stop.clear()
        self._thread = threading.Thread(target=self._supervise, name="worker-child", daemon=True)
        self._thread.start()

    def wait_healthy(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._healthy.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
                return True
            if self._state == "failed":
                return False
        return self._healthy.is_set()

    def stop(self, timeout_s: float | None = None) -> ChildStatus:
        """SIGTERM (drain), SIGKILL after the grace period; stop supervising."""
        self._stop.set()
        self._terminate(self.grace_s if timeout_s is None else timeout_s)
        if self._thread is not None:
            self._thread.join(10.0)
        if self._config_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._config_file)
            self._config_file = None
        if self._state != "failed":
            self._state = "stopped"
        return self.status

    # -- supervisor thread --------------------------------------------------------------------
    def _supervise(self) -> None:
        backoff = self.backoff_initial_s
        with httpx.Client(timeout=2.0) as http:
            while not self._stop.is_set():
                try:
                    healthy = self._run_once(http)
                except Exception as exc:  # never let the supervisor die silently
                    log.exception("worker supervisor error")
                    self._error, healthy = f"{type(exc).__name__}: {exc}", False
                if self._stop.is_set() or self._state == "failed":
                    return
                if healthy:
                    backoff = self.backoff_initial_s
                self._restarts += 1
                self._state = "backoff"
                log.warning("worker exited (%s); restarting in %.1f s", self._last_exit, backoff)
                if self._stop.wait(backoff):
                    return
                backoff = min(self.backoff_max_s, backoff * 2)

    def _run_once(self, http: httpx.Client) -> bool:
        """Spawn, wait for health, watch until it dies; True if it was healthy at some point."""
        assert self._config_file is not None
        self._healthy.clear()
        self._state = "starting"
        with self._lock:
            if self._stop.is_set():
                return False
            self._proc = subprocess.Popen(
                [self.python, "-m", "worker", "--config", self._config_file, "serve", "--log-level", "warning"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self._child_env(), cwd=self.cwd,
                start_new_session=True,
            )
        proc = self._proc
        threading.Thread(target=self._pump, args=(proc.stdout,), name="worker-child-output", daemon=True).start()
        started = last_ok = self.clock()
        was_healthy = False
        health_url = self.url + self.config.health_check_path
        while proc.poll() is None and not self._stop.is_set():
            ok = self._check(http, health_url)
            now = self.clock()
            if ok:
                last_ok, was_healthy = now, True
                self._state = "healthy"
                self._error = None
                self._healthy.set()
            elif was_healthy:
                self._state = "unhealthy"
                self._healthy.clear()
                if now - last_ok > self.unhealthy_restart_s:
                    self._error = f"health check failing for {now - last_ok:.0f} s; restarting"
                    self._terminate(self.grace_s)
            elif now - started > self.health_timeout_s:
                self._error = f"not healthy within {self.health_timeout_s:.0f} s; restarting"
                self._terminate(self.grace_s)
            # wakes at once when the child dies (stop() terminates it, which wakes this too)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(self.poll_s if not was_healthy else self.health_interval_s)
        proc.wait()
        self._healthy.clear()
        self._last_exit = proc.returncode
        if proc.returncode == EXIT_REFUSED:
            self._state = "failed"
            refusal = [line for line in self._tail if "refusing to start" in line]
            self._error = refusal[-1] if refusal else f"worker refused to start (exit {EXIT_REFUSED})"
        elif not self._stop.is_set() and self._error is None:
            self._error = f"worker exited with {proc.returncode}"
        return was_healthy

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # do not spin cores the service needs
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    @staticmethod
    def _check(http: httpx.Client, url: str) -> bool:
        try:
            return http.get(url).status_code == 200
        except httpx.HTTPError:
            return False

    def _pump(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            self._tail.append(line)
            log.info("worker: %s", line)

    def _terminate(self, grace_s: float) -> None:
        with self._lock:
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            log.warning("worker did not stop within %.1f s; killing it", grace_s)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()


class EmbeddedWorker:
    """What ``infermeter up`` runs: the worker child plus, when ``baseline.enabled``, the baseline
    load against it.  Call ``await start()`` in the service's lifespan startup (it returns at
    once; the worker loads in the background and the load waits for its health check) and
    ``await stop()`` at shutdown.  Nothing here raises; :meth:`status` reports both parts."""

    def __init__(self, config: WorkerConfig, child: WorkerChild | None = None,
                 load: BaselineLoad | None = None) -> None:
        self.config = config
        self.child = child or WorkerChild(config)
        self.load = load or BaselineLoad.for_worker(config)

    async def start(self) -> None:
        if not self.config.embedded:
            return
        await asyncio.to_thread(self.child.start)
        if self.config.baseline.enabled:
            self.load.start()

    async def stop(self, timeout_s: float | None = None) -> None:
        await self.load.stop()
        await asyncio.to_thread(self.child.stop, timeout_s)

    def status(self) -> dict[str, object]:
        child, load = self.child.status, self.load.status
        return {
            "enabled": self.config.embedded,
            "url": child.url,
            "state": child.state,
            "pid": child.pid,
            "restarts": child.restarts,
            "error": child.error,
            "baseline": {"enabled": self.config.baseline.enabled, "state": load.state, "sent": load.sent,
                         "ok": load.ok, "failed": load.failed, "failures": load.failures,
                         "last_error": load.last_error},
        }
