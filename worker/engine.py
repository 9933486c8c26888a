"""Continuous (iteration-level) batching over a KV cache, in one engine thread.

Each iteration: take new submissions; finish what passed its deadline or was cancelled;
prefill waiting prompts for at most ``prefill_chunk_tokens`` tokens (chunked: a long prompt is
spread over several iterations, so it cannot stall the running requests for long); then one
batched decode step for every running sequence.  A sequence joins the decode batch the
iteration its prefill completes and leaves it the iteration it finishes -- no waiting for a
whole batch to drain.

Slots: running sequences occupy KV-cache slots ``0..n-1`` and the one partly prefilled prompt,
if any, slot ``n``.  When slot ``i`` finishes, the last running sequence moves into it (its
cache rows are copied), keeping the decode batch a dense prefix of the cache.

Outputs are data: per iteration the engine hands a list of :class:`TokenEvent` /
:class:`FinishEvent` to ``emit`` (called on the engine thread; the server forwards them to its
event loop).  A model error fails the running requests with reason ``error`` and the engine
carries on.  Time comes from the injected ``clock`` (monotonic seconds).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from worker.events import (
    EngineStats,
    Event,
    FinishEvent,
    FinishReason,
    GenerationRequest,
    SubmitOutcome,
    Timings,
    TokenEvent,
)
from worker.sampling import sample

log = logging.getLogger("worker.engine")

class Cache(Protocol):
    def move(self, src: int, dst: int, length: int) -> None: ...

    def shrink(self) -> None: ...


class Model(Protocol):
    """What the engine needs of a model (``worker.model.LlamaDecoder``; tests use a fake).
    ``cache`` is whatever ``new_cache`` returned."""

    def new_cache(self, slots: int, max_len: int) -> Cache: ...

    def prefill(self, cache: Any, slot: int, tokens: list[int], start: int) -> torch.Tensor: ...

    def decode(self, cache: Any, tokens: list[int], positions: list[int]) -> torch.Tensor: ...


@dataclass
class _Seq:
    req: GenerationRequest
    timings: Timings
    generator: torch.Generator | None
    slot: int = -1
    prefilled: int = 0
    generated: list[int] = field(default_factory=list)

    @property
    def cache_len(self) -> int:  # positions written: the prompt and all but the last token
        return len(self.req.prompt_ids) + max(0, len(self.generated) - 1)


class Engine:
    def __init__(
        self,
        model: Model,
        *,
        max_batch_size: int,
        max_context_length: int,
        max_waiting: int,
        prefill_chunk_tokens: int,
        eos_id: int,
        banned_ids: Sequence[int],
        emit: Callable[[list[Event]], None],
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
    ) -> None:
        self.model, self.emit, self.clock = model, emit, clock
        self.max_batch, self.max_context = max_batch_size, max_context_length
        self.max_waiting, self.chunk = max_waiting, prefill_chunk_tokens
        self.eos_id, self.banned = eos_id, list(banned_ids)
        self.cache = model.new_cache(max_batch_size, max_context_length)
        self._device = getattr(model, "device", torch.device("cpu"))
        self._shared_gen = torch.Generator(device=self._device).manual_seed(seed)
        self._cv = threading.Condition()
        self._inbox: list[_Seq] = []
        self._cancels: set[str] = set()
        self._in_system = 0
        self._accepting = True
        self._stopping = False
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []
        self._partial: _Seq | None = None
        self._thread: threading.Thread | None = None
        self.steps = 0

    # -- public, any thread ---------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="worker-engine", daemon=True)
        self._thread.start()

    def submit(self, req: GenerationRequest) -> SubmitOutcome:
        gen = None
        if req.seed is not None:
            gen = torch.Generator(device=self._device).manual_seed(req.seed)
        with self._cv:
            if not self._accepting:
                return "draining"
            if self._in_system >= self.max_batch + self.max_waiting:
                return "queue_full"
            self._in_system += 1
            self._inbox.append(_Seq(req, Timings(req.arrival), gen))
            self._cv.notify()
        return "accepted"

    def cancel(self, request_id: str) -> None:
        with self._cv:
            self._cancels.add(request_id)
            self._cv.notify()

    def stats(self) -> EngineStats:
        running = list(self._running)
        partial = self._partial
        active = running + ([partial] if partial is not None else [])
        return EngineStats(
            running=len(active),
            waiting=len(self._waiting) + len(self._inbox),
            kv_tokens=sum(s.cache_len for s in active),
            kv_capacity_tokens=self.max_batch * self.max_context,
            steps=self.steps,
        )

    @property
    def in_system(self) -> int:
        return self._in_system

    def stop_accepting(self) -> None:
        with self._cv:
            self._accepting = False

    def drain(self, timeout_s: float) -> bool:
        """Stop accepting and wait until every accepted request finished; False on timeout."""
        self.stop_accepting()
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._in_system > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.05))
        return True

    def stop(self, timeout_s: float = 5.0) -> None:
        """Abort what is left and end the thread."""
        with self._cv:
            self._accepting = False
            self._stopping = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- engine thread --------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not (self._inbox or self._cancels or self._stopping or self._waiting
                           or self._running or self._partial):
                    self.cache.shrink()
                    self._cv.wait()
                self._waiting.extend(self._inbox)
                self._inbox.clear()
                cancels, self._cancels = self._cancels, set()
                stopping = self._stopping
            events: list[Event] = []
            if stopping:
                self._finish_all("abort", events, "engine stopped")
                self._deliver(events)
                return
            try:
                self._iteration(cancels, events)
            except Exception as exc:  # the model failed: fail the active requests, keep serving
                log.exception("engine iteration failed")
                self._finish_active("error", events, f"{type(exc).__name__}: {exc}")
            self._deliver(events)

    def _deliver(self, events: list[Event]) -> None:
        if not events:
            return
        finished = sum(isinstance(e, FinishEvent) for e in events)
        try:
            self.emit(events)
        except Exception:
            log.exception("emit failed")
        if finished:
            with self._cv:
                self._in_system -= finished
                self._cv.notify_all()

    def _iteration(self, cancels: set[str], events: list[Event]) -> None:
        now = self.clock()
        self._expire(now, cancels, events)
        self._prefill(events)
        self._decode(events)
        self.steps += 1

    def _expire(self, now: float, cancels: set[str], events: list[Event]) -> None:
        def why(s: _Seq) -> FinishReason | None:
            if s.req.request_id in cancels:
                return "abort"
            return "timeout" if now >= s.req.deadline else None

        for s in [s for s in self._waiting if why(s)]:
            self._waiting.remove(s)
            self._finish(s, why(s) or "abort", events)
        if self._partial is not None and (reason := why(self._partial)):
            self._finish(self._partial, reason, events)
            self._partial = None
        gone = [s.slot for s in self._running if why(s)]
        for slot in sorted(gone, reverse=True):
            self._finish(self._running[slot], why(self._running[slot]) or "abort", events)
        self._compact(gone)

    def _prefill(self, events: list[Event]) -> None:
        budget = self.chunk
        while budget > 0:
            if self._partial is None:
                if not self._waiting or len(self._running) >= self.max_batch:
                    return
                seq = self._waiting.popleft()
                seq.slot = len(self._running)
                seq.timings.scheduled = self.clock()
                self._partial = seq
            seq = self._partial
            prompt = seq.req.prompt_ids
            take = min(budget, len(prompt) - seq.prefilled)
            t0 = self.clock()
            logits = self.model.prefill(self.cache, seq.slot, prompt[seq.prefilled : seq.prefilled + take], seq.prefilled)
            seq.prefilled += take
            budget -= take
            if seq.prefilled < len(prompt):
                seq.timings.prefill_s += self.clock() - t0
                continue
            token = sample(logits[None, :], [seq.req.temperature], [seq.generator], self._shared_gen, self.banned)[0]
            seq.timings.prefill_s += self.clock() - t0
            self._partial = None
            if not self._add_token(seq, token, events):
                self._running.append(seq)

    def _decode(self, events: list[Event]) -> None:
        running = self._running
        if not running:
            return
        tokens = [s.generated[-1] for s in running]
        positions = [s.cache_len for s in running]
        logits = self.model.decode(self.cache, tokens, positions)
        picks = sample(
            logits, [s.req.temperature for s in running], [s.generator for s in running], self._shared_gen, self.banned
        )
        done = [s.slot for s, tok in zip(running, picks) if self._add_token(s, tok, events)]
        self._compact(done)

    def _add_token(self, seq: _Seq, token: int, events: list[Event]) -> bool:
        """Record a token; True (and the finish event) when the sequence is done."""
        t = self.clock()
        seq.generated.append(token)
        if seq.timings.first_token is None:
            seq.timings.first_token = t
        seq.timings.token_times.append(t)
        events.append(TokenEvent(seq.req.request_id, token, t))
        reason: FinishReason | None = None
        if token == self.eos_id and not seq.req.ignore_eos:
            reason = "stop"
        elif len(seq.generated) >= seq.req.max_tokens or seq.cache_len + 1 >= self.max_context:
            reason = "length"
        if reason is not None:
            self._finish(seq, reason, events)
            return True
        return False

    def _compact(self, finished_slots: list[int]) -> None:
        """Close the holes left by finished slots (highest first) and keep the partial prompt
        right after the running ones."""
        if not finished_slots:
            return
        for slot in sorted(finished_slots, reverse=True):
            last = self._running.pop()
            if last.slot != slot:
                self.cache.move(last.slot, slot, last.cache_len)
                last.slot = slot
                self._running[slot] = last
        if self._partial is not None and self._partial.slot != len(self._running):
            self.cache.move(self._partial.slot, len(self._running), self._partial.prefilled)
            self._partial.slot = len(self._running)

    def _finish(self, seq: _Seq, reason: FinishReason, events: list[Event], error: str | None = None) -> None:
        seq.timings.finished = self.clock()
        events.append(
            FinishEvent(seq.req.request_id, reason, len(seq.req.prompt_ids), len(seq.generated), seq.timings, error)
        )

    def _finish_active(self, reason: FinishReason, events: list[Event], error: str) -> None:
        for s in self._running:
            self._finish(s, reason, events, error)
        if self._partial is not None:
            self._finish(self._partial, reason, events, error)
        self._running, self._partial = [], None

    def _finish_all(self, reason: FinishReason, events: list[Event], error: str) -> None:
        self._finish_active(reason, events, error)
        while self._waiting:
            self._finish(self._waiting.popleft(), reason, events, error)
