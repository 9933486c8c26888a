"""The delivery loop: takes due outbox rows, sends them on a small thread pool, records outcomes.

One attempt in flight per integration (a receiver that is down or slow holds up only its own
notifications, and is not hammered in parallel). Retry delays are capped exponential backoff
with full jitter — ``uniform(0, min(max_backoff, initial * 2**(attempt-1)))`` — and never
shorter than a receiver's ``Retry-After`` (capped at ``max_retry_after``), which also pauses
the whole integration. A row older than ``max_age`` fails as ``expired``; a row whose
integration is gone from the config fails as ``unknown_integration``.

Threads, not asyncio: sends are blocking httpx calls and the database access is synchronous;
``poll(wait=True)`` runs one pass to completion, which is how fake-clock tests drive it.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures

from alerts.notify.config import DeliveryConfig, RetryConfig
from alerts.notify.integrations import Integration
from alerts.notify.metrics import NotifyMetrics
from alerts.notify.outbox import Outbox, OutboxRow
from alerts.notify.sinks import Message, SendResult
from ha.role import ALONE, Leadership
from store.clock import Clock

log = logging.getLogger(__name__)

Waiter = Callable[[threading.Event, float], bool]
LEASE_MARGIN_MS = 30_000


def event_wait(event: threading.Event, timeout_s: float) -> bool:
    return event.wait(timeout_s)


def backoff_ms(attempt: int, retry: RetryConfig, rng: random.Random) -> int:
    # Deliberately not a retry library. The attempt count and the next attempt time live in the
    # outbox (they survive restarts), so no decorator/loop (tenacity, stamina) can own the retry.
    # tenacity's wait_random_exponential is this exact formula, but it draws from the global
    # `random` module (no way to pass our seeded rng) and wants a RetryCallState built around a
    # Retrying object just to read `attempt_number`; two lines are clearer than that.
    ceiling = min(retry.max_backoff, retry.initial_backoff * 2 ** max(0, min(attempt - 1, 40)))
    return int(rng.uniform(0, ceiling))


class Dispatcher:
    def __init__(
        self,
        outbox: Outbox,
        integrations: Mapping[str, Integration],
        clock: Clock,
        rng: random.Random,
        retry: RetryConfig,
        delivery: DeliveryConfig,
        metrics: NotifyMetrics,
        waiter: Waiter = event_wait,
        leadership: Leadership = ALONE,
        confirm: Callable[[], bool] = lambda: True,
    ) -> None:
        """``confirm``: asked right before each send (an HA pair's fence: is the lease still
        ours?); a claimed row it refuses is left to its lease, and so to the new leader."""
        self._outbox = outbox
        self._leadership = leadership
        self._confirm = confirm
        self._integrations = dict(integrations)
        self._clock = clock
        self._rng = rng
        self._rng_lock = threading.Lock()
        self._retry = retry
        self._delivery = delivery
        self._metrics = metrics
        self._waiter = waiter
        self._lock = threading.Lock()
        self._in_flight: dict[str, Future[None]] = {}
        self._paused_until: dict[str, int] = {}
        # Integrations whose last attempt failed (retryably) -> when one of theirs was last tried:
        # probed every probe_interval, so a recovered receiver is found within that, not after the
        # oldest row's backoff (up to max_backoff).
        self._failing: dict[str, int] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_gc_ms = 0

    # -- one pass -----------------------------------------------------------------------------
    def poll(self, wait: bool = False) -> int:
        """Starts every due attempt; returns ms until the loop should look again (at most
        poll_interval; a finished attempt wakes it earlier)."""
        now = self._clock.now_ms()
        started: list[Future[None]] = []
        wake_at = now + self._delivery.poll_interval
        for key in self._outbox.due_integrations(now):
            with self._lock:
                if key in self._in_flight:
                    continue  # its completion wakes the loop
                paused = self._paused_until.get(key, 0)
                if paused > now:
                    wake_at = min(wake_at, paused)
                    continue
            integration = self._integrations.get(key)
            row = self._outbox.oldest_due(key, now)
            while row is not None and (integration is None or now - row.created_ms > self._retry.max_age):
                if integration is None:
                    self._give_up(row, now, None, f"integration {key!r} is not in the config any more", "unknown_integration")
                else:
                    self._give_up(row, now, row.last_status, row.last_error or "not delivered within max_age", "expired")
                row = self._outbox.oldest_due(key, now)
            if row is None or integration is None:
                continue
            self._start(key, integration, row, now, started)
        wake_at = min(wake_at, self._probe(now, started))
        if wait and started:
            wait_futures(started)
            with self._lock:  # done callbacks may still be on their way; settle them now
                for key, future in list(self._in_flight.items()):
                    if future.done():
                        del self._in_flight[key]
        self._metrics.outbox_depth.set(self._outbox.depth())
        if now - self._last_gc_ms >= 60_000:
            self._last_gc_ms = now
            self._outbox.gc(now, self._delivery.keep_sent, self._delivery.keep_failed)
        upcoming = self._outbox.next_attempt_ms(after_ms=now)
        if upcoming is not None:
            wake_at = min(wake_at, upcoming)
        return max(0, wake_at - self._clock.now_ms())

    def _start(self, key: str, integration: Integration, row: OutboxRow, now: int, started: list[Future[None]]) -> None:
        lease = now + int(integration.sink.timeout_s * 1000) + LEASE_MARGIN_MS
        if not self._outbox.claim(row, lease, now):
            return
        future = self._executor().submit(self._deliver, integration, row)
        with self._lock:
            self._in_flight[key] = future
            if key in self._failing:
                self._failing[key] = now
        future.add_done_callback(functools.partial(self._done, key))
        started.append(future)

    def _probe(self, now: int, started: list[Future[None]]) -> int:
        """Try the oldest row of each failing integration whose probe is due, backoff or not;
        returns when the next probe is due."""
        every = self._delivery.probe_interval
        wake_at = now + self._delivery.poll_interval
        if not every:
            return wake_at
        with self._lock:
            failing = [(key, last) for key, last in self._failing.items()
                       if key not in self._in_flight and self._paused_until.get(key, 0) <= now]
        for key, last in failing:
            if now - last < every:
                wake_at = min(wake_at, last + every)
                continue
            integration = self._integrations.get(key)
            row = self._outbox.oldest_pending(key)
            if integration is None or row is None:
                with self._lock:
                    self._failing.pop(key, None)
                continue
            if row.next_attempt_ms > now:  # waiting on its backoff (or a claim's lease: claim() refuses that)
                self._start(key, integration, row, now, started)
            wake_at = min(wake_at, now + every)
        return wake_at

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._delivery.workers, thread_name_prefix="notify-send")
        return self._pool

    def _done(self, key: str, _future: Future[None]) -> None:
        with self._lock:
            self._in_flight.pop(key, None)
        self._wake.set()

    def _deliver(self, integration: Integration, row: OutboxRow) -> None:
        attempt = row.attempts + 1
        message = Message(row.id, row.body, row.created_ms, attempt)
        if not self._confirm():
            log.info("notification %s not sent: this process no longer leads", row.id)
            return
        try:
            result = integration.sink.send(message, integration.sink.timeout_s)
        except Exception as exc:  # a sink bug degrades this attempt only; it is retried
            log.exception("notification sink %s raised", integration.key)
            result = SendResult(False, True, reason="error", detail=f"{type(exc).__name__}: {exc}"[:512])
        now = self._clock.now_ms()
        try:
            self._record(integration.key, row, attempt, result, now)
        except Exception:  # the lease runs out and the row is tried again
            log.exception("could not record the outcome of notification %s", row.id)

    def _record(self, key: str, row: OutboxRow, attempt: int, result: SendResult, now: int) -> None:
        if result.ok:
            self._outbox.mark_sent(row.id, now, result.status)
            self._metrics.sent.labels(key).inc()
            self._metrics.latency.labels(key).observe(max(0, now - row.created_ms) / 1000)
            with self._lock:
                recovered = self._failing.pop(key, None) is not None
            if recovered:  # the receiver answers again: what waited on a backoff goes now
                released = self._outbox.release_backoff(key, now)
                if released:
                    log.info("%s answers again: %d queued notifications sent now", key, released)
                    self._wake.set()
            return
        error = result.detail or result.reason
        if not result.retryable:
            self._give_up(row, now, result.status, error, result.reason)
            return
        with self._lock:
            self._failing[key] = now
        with self._rng_lock:
            delay = backoff_ms(attempt, self._retry, self._rng)
        if result.retry_after_ms is not None:
            honoured = min(result.retry_after_ms, self._retry.max_retry_after)
            delay = max(delay, honoured)
            with self._lock:
                self._paused_until[key] = now + honoured
        self._outbox.mark_retry(row.id, now + delay, now, result.status, error, result.reason)
        self._metrics.retries.labels(key, result.reason).inc()
        log.info("notification %s to %s failed (%s), retry in %.1fs", row.id, key, result.reason, delay / 1000)

    def _give_up(self, row: OutboxRow, now: int, status: int | None, error: str, reason: str) -> None:
        self._outbox.mark_failed(row.id, now, status, error, reason)
        self._metrics.failed.labels(row.integration, reason).inc()
        log.warning("notification %s to %s failed for good (%s): %s", row.id, row.integration, reason, error[:200])

    def wake(self) -> None:
        self._wake.set()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="notify-dispatch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            if not self._leadership.leading():  # the leader delivers
                self._waiter(self._wake, self._delivery.poll_interval / 1000)
                continue
            try:
                wait_ms = self.poll()
            except Exception:  # the database may be briefly unreachable; try again later
                log.exception("outbox poll failed")
                wait_ms = self._delivery.poll_interval
            self._waiter(self._wake, wait_ms / 1000)

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stops polling and waits for attempts in flight; True when none was left behind.
        An attempt still running after ``timeout_s`` is retried after its lease by the next start."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        with self._lock:
            pending = list(self._in_flight.values())
        _, not_done = wait_futures(pending, timeout=timeout_s) if pending else (set(), set())
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if not not_done:
            for integration in self._integrations.values():
                integration.sink.close()
        return not not_done
