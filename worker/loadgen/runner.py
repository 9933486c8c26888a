"""Drive a server: closed loop (N users, each sending its next request when the previous one
answered, after an optional think time), open loop (Poisson arrivals at a rate), or trace
replay (the trace's arrival times, divided by ``speedup``).  It stops after ``requests``
requests, after ``duration_s`` (no new sends; in-flight requests finish), or when ``stop`` is
set (in-flight requests are cancelled) -- whichever comes first.

The clock, the random generator and the HTTP client are parameters.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from worker.loadgen.client import Endpoint, RequestResult, request_body, send
from worker.loadgen.progress import Progress
from worker.loadgen.report import LoadReport
from worker.loadgen.traces import Trace
from worker.loadgen.workload import (
    LengthDist,
    RequestSpec,
    from_trace,
    make_prompt,
    poisson_arrivals,
    synthetic,
)


@dataclass(frozen=True)
class LoadOptions:
    url: str = "http://127.0.0.1:8080"
    endpoint: Endpoint = "generate"
    concurrency: int = 1  # closed loop users (ignored with rate or trace)
    rate: float | None = None  # open loop, requests/s
    trace: Trace | None = None
    speedup: float = 1.0
    duration_s: float | None = None
    requests: int | None = None
    prompt: LengthDist = field(default_factory=lambda: LengthDist.parse("128"))
    output: LengthDist = field(default_factory=lambda: LengthDist.parse("64"))
    stream: bool = True
    temperature: float = 1.0
    ignore_eos: bool = True  # fixed output lengths: the server keeps going past </s>
    model: str | None = None
    timeout_s: float = 60.0
    max_context: int = 8192
    think_time_s: float = 0.0
    seed: int = 0
    max_inflight: int = 4096
    warmup: int = 0
    # closed loop: a user pauses this long after a failed request (a dead server is not hammered)
    failure_backoff_s: float = 0.0

    @property
    def mode(self) -> str:
        if self.trace is not None:
            return f"trace replay x{self.speedup:g}"
        if self.rate is not None:
            return f"open loop, Poisson {self.rate:g} req/s"
        return f"closed loop, {self.concurrency} users"


async def run_load(
    opts: LoadOptions,
    *,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
    on_result: Callable[[RequestResult], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
    client: httpx.AsyncClient | None = None,
) -> LoadReport:
    rng = rng or random.Random(opts.seed)
    stop = stop or asyncio.Event()
    own_client = client is None
    if client is None:
        size = max(opts.concurrency, 64) * 2
        client = httpx.AsyncClient(
            base_url=opts.url, timeout=httpx.Timeout(opts.timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
        )
    notes: list[str] = []
    results: list[RequestResult] = []
    t0 = clock()

    async def one(spec: RequestSpec, record: bool = True) -> bool:
        body = request_body(
            opts.endpoint, make_prompt(spec.prompt_tokens, rng, spec.blocks), spec.output_tokens,
            stream=opts.stream, temperature=opts.temperature, ignore_eos=opts.ignore_eos, model=opts.model,
        )
        result = await send(client, opts.endpoint, body, start_s=clock() - t0, clock=clock)
        if not record:
            return result.ok
        results.append(result)
        if on_result is not None:
            on_result(result)
        if progress is not None:
            progress.update(len(results), sum(not r.ok for r in results), clock() - t0)
        return result.ok

    def done_sending(sent: int, now: float) -> bool:
        return (stop.is_set() or (opts.requests is not None and sent >= opts.requests)
                or (opts.duration_s is not None and now - t0 >= opts.duration_s))

    try:
        specs = synthetic(opts.prompt, opts.output, rng, opts.max_context)
        for _ in range(opts.warmup):
            await one(next(specs), record=False)
        t0 = clock()
        if opts.trace is not None or opts.rate is not None:
            await _open_loop(opts, specs, rng, one, done_sending, stop, clock, t0, notes)
        else:
            await _closed_loop(opts, specs, one, done_sending, stop, clock)
    finally:
        if own_client:
            await client.aclose()
        if progress is not None:
            progress.close()
    elapsed = (max(r.start_s + r.e2e_s for r in results) - min(r.start_s for r in results)) if results else 0.0
    return LoadReport.build(results, elapsed, opts.url, opts.mode, notes)


async def _closed_loop(
    opts: LoadOptions, specs: Iterator[RequestSpec], one: Callable[[RequestSpec], Awaitable[bool]],
    done_sending: Callable[[int, float], bool], stop: asyncio.Event, clock: Callable[[], float],
) -> None:
    sent = 0

    async def user() -> None:
        nonlocal sent
        while not done_sending(sent, clock()):
            sent += 1
            ok = await one(next(specs))
            pause = opts.think_time_s if ok else max(opts.think_time_s, opts.failure_backoff_s)
            if pause > 0 and not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), pause)
                except TimeoutError:
                    pass

    users: list[asyncio.Future[Any]] = [asyncio.ensure_future(user()) for _ in range(opts.concurrency)]
    await _until_stopped(users, stop)


async def _open_loop(
    opts: LoadOptions, specs: Iterator[RequestSpec], rng: random.Random, one: Callable[[RequestSpec], Awaitable[bool]],
    done_sending: Callable[[int, float], bool], stop: asyncio.Event, clock: Callable[[], float], t0: float,
    notes: list[str],
) -> None:
    if opts.trace is not None:
        planned, _ = from_trace(opts.trace, speedup=opts.speedup, max_context=opts.max_context)
        if opts.duration_s is not None:
            planned = [s for s in planned if (s.at_s or 0.0) < opts.duration_s]
        if opts.requests is not None:
            planned = planned[: opts.requests]
        originals = opts.trace.records[: len(planned)]
        clipped = sum((s.prompt_tokens, s.output_tokens) != (r.prompt_tokens, r.output_tokens)
                      for s, r in zip(planned, originals))
        if clipped:
            notes.append(f"{clipped} trace records shortened to fit max_context {opts.max_context}")
        if opts.trace.skipped:
            notes.append(f"{len(opts.trace.skipped)} unreadable trace lines skipped (first: {opts.trace.skipped[0]})")
        arrivals: Iterator[RequestSpec] = iter(planned)
    else:
        assert opts.rate is not None
        times = poisson_arrivals(opts.rate, rng)
        arrivals = (RequestSpec(s.prompt_tokens, s.output_tokens, next(times)) for s in specs)
    tasks: set[asyncio.Future[Any]] = set()
    sent = 0
    for spec in arrivals:
        at = spec.at_s or 0.0
        delay = t0 + at - clock()
        if opts.duration_s is not None and at >= opts.duration_s:
            break
        if delay > 0:
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                pass
        if done_sending(sent, clock()):
            break
        if len(tasks) >= opts.max_inflight:
            note = f"client saturated: more than {opts.max_inflight} requests in flight delayed some arrivals"
            if note not in notes:
                notes.append(note)
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.ensure_future(one(spec))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        sent += 1
    await _until_stopped(list(tasks), stop)


async def _until_stopped(tasks: list[asyncio.Future[Any]], stop: asyncio.Event) -> None:
    """Wait for ``tasks``; if ``stop`` is set first, cancel them."""
    if not tasks:
        return
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    pending: set[asyncio.Future[Any]] = set(tasks)
    try:
        while pending and not stop.is_set():
            done, pending = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(stopper)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
    finally:
        stopper.cancel()
