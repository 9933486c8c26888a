"""This process's role in an HA pair: a thread that keeps the lease while leading and tries to
take it while following.

Timing (``d`` = the lease duration): a leader renews every ``d/3``; a follower tries every
``d/4``, so it leads at most ``d + d/4`` after the leader's last renewal. A leader counts itself
leader only until ``d - d/4`` after the start of its last successful renewal, by its own
monotonic clock: cut off from the database (or paused), it stops acting before the lease can
pass to the other process, and the fence (:mod:`ha.fence`) rejects whatever it still tries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ha.lease import LeaseStore
from ha.role import Role

log = logging.getLogger(__name__)


class Elector:
    def __init__(self, leases: LeaseStore, holder: str, *, monotonic: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.leases = leases
        self.holder = holder
        self.duration_s = leases.duration_ms / 1000
        self._monotonic = monotonic
        self._wall_ms = wall_ms
        self._lock = threading.Lock()
        self._token = 0
        self._valid_until = 0.0  # monotonic time the current lease stops counting
        self._since_ms = wall_ms()
        self.last_error = ""
        self.changes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the other parts ask ---------------------------------------------------------------
    def role(self) -> Role:
        with self._lock:
            leading = self._token > 0 and self._monotonic() < self._valid_until
            return Role(leading, self._token if leading else 0, self._since_ms)

    def leading(self) -> bool:
        return self.role().leading

    def term(self) -> int:
        """The lease token while leading, 0 while following: a part that sees a new term has
        just been handed the lead and reloads what the previous leader left."""
        return self.role().token

    # -- one step ---------------------------------------------------------------------------------
    def step(self) -> None:
        started = self._monotonic()
        with self._lock:
            token = self._token
        try:
            if token:
                kept = self.leases.renew(self.holder, token)
                new = token if kept else 0
                if not kept:
                    log.warning("lost the lead: the lease passed to another process")
            else:
                new = self.leases.try_acquire(self.holder) or 0
                if new:
                    log.warning("took the lead (lease token %d)", new)
            self.last_error = ""
        except Exception as exc:  # the database is away: keep what we have until it lapses
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.debug("lease step failed: %s", self.last_error)
            return
        with self._lock:
            if new != self._token:  # took, lost, or (after a lapse) retook the lead
                self._since_ms = self._wall_ms()
                self.changes += 1
            self._token = new
            if new:
                self._valid_until = started + self.duration_s * 0.75

    def release(self) -> None:
        with self._lock:
            token, self._token = self._token, 0
            self._since_ms = self._wall_ms()
        if token:
            try:
                self.leases.release(self.holder, token)
            except Exception as exc:
                log.warning("could not release the lease: %s", exc)

    # -- the loop ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self.step()  # know the role before the other loops start
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ha-elector", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            leading = self.leading()
            self._stop.wait(self.duration_s / 3 if leading else self.duration_s / 4)
            if not self._stop.is_set():
                self.step()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self.release()
