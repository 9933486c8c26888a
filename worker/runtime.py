"""The worker's start-up and shutdown: plan memory, verify, load, warm up, serve, drain.

``WorkerRuntime.load`` runs on a background thread while the HTTP server already answers, so
the health path can say 503 until the weights are loaded, verified and warmed up (seed 004
step 2.4).  Failures are data: ``state`` becomes ``failed`` and ``error`` holds the message
(memory plan refusal, manifest mismatch, unsupported precision...); nothing raises into the
server.  ``on_failed`` lets ``worker serve`` exit non-zero with that message.

States: starting -> loading -> warming -> ready -> draining -> stopped, or -> failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from worker.config import SERVABLE_PRECISIONS, WorkerConfig
from worker.events import EngineStats, Event

if TYPE_CHECKING:
    from worker.engine import Engine
    from worker.moe import ExpertRouter
    from worker.tokenizer import Tokenizer

log = logging.getLogger("worker.runtime")

State = Literal["starting", "loading", "warming", "ready", "failed", "draining", "stopped"]


@dataclass(frozen=True)
class ModelInfo:
    name: str
    directory: str
    parameters: int
    precision: str
    device: str
    packed_weights: bool
    generated: bool
    max_context_length: int
    load_seconds: float
    tokenizer: str


class WorkerRuntime:
    def __init__(
        self,
        config: WorkerConfig,
        emit: Callable[[list[Event]], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        gate: threading.Event | None = None,
        on_failed: Callable[[str], None] | None = None,
    ) -> None:
        self.config, self.emit, self.clock = config, emit, clock
        self.gate, self.on_failed = gate, on_failed
        self.state: State = "starting"
        self.error: str | None = None
        self.info: ModelInfo | None = None
        self.engine: Engine | None = None
        self.tokenizer: Tokenizer | None = None
        self.max_context = config.max_context_length
        self.bos_id = 0
        self.router: ExpertRouter | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self.load, name="worker-load", daemon=True)
        self._thread.start()

    def load(self) -> None:
        """Plan, verify, load and warm up; never raises (sets ``state``/``error``)."""
        try:
            if self.gate is not None:
                self.gate.wait()
            if self.state != "starting":
                return
            self.state = "loading"
            self._load()
            self.state = "ready"
            log.info("worker ready: %s", self.info)
        except Exception as exc:
            self._fail(f"{type(exc).__name__}: {exc}" if not _clear(exc) else str(exc))

    def _fail(self, message: str) -> None:
        self.state, self.error = "failed", message
        log.error("worker failed to start: %s", message)
        if self.on_failed is not None:
            self.on_failed(message)

    def _load(self) -> None:
        import torch

        from worker.engine import Engine
        from worker.model import LlamaDecoder, pick_device, pick_dtype, precision_name
        from worker.moe import ExpertRouter
        from worker.planner import host_memory, plan_memory
        from worker.shapes import with_context
        from worker.tokenizer import load_tokenizer
        from worker.weights import ensure_weights, load_tensors, locate_model, verify_manifest

        cfg = self.config
        started = time.monotonic()
        if cfg.precision not in SERVABLE_PRECISIONS:
            raise ValueError(
                f"precision {cfg.precision} is for `infermeter plan` only; the reference engine runs "
                f"{', '.join(SERVABLE_PRECISIONS)}"
            )
        if cfg.tensor_parallel_size != 1:
            raise ValueError(
                f"tensor_parallel_size {cfg.tensor_parallel_size}: the reference worker runs on one device "
                "(use `infermeter plan --tensor-parallel-size N` for sizing)"
            )
        device = pick_device(cfg.device)
        dtype = pick_dtype(cfg.precision, device)
        location = locate_model(cfg.model_path, cfg.model_dir, cfg.seed)
        shape = location.shape
        if location.reference:
            shape = with_context(shape, cfg.max_context_length)
        self.max_context = min(cfg.max_context_length, shape.max_position_embeddings)
        if device.type == "cuda":
            free, total = torch.cuda.mem_get_info(device)
            device_name = torch.cuda.get_device_name(device)
        else:
            total, free = host_memory()
            device_name = "CPU (host memory)"
        if total:
            plan = plan_memory(
                shape, precision=precision_name(dtype), tensor_parallel_size=1, max_context_length=self.max_context,
                max_batch_size=cfg.max_batch_size, device=device_name, total_bytes=total, free_bytes=free,
                margin=cfg.memory_margin,
            )
            for line in plan.lines():
                log.info("memory plan: %s", line)
            if not plan.fits:
                raise _Refused(plan.refusal())
        if device.type == "cpu":
            torch.set_num_threads(cfg.num_threads or auto_threads(shape.param_count() * torch.empty((), dtype=dtype).element_size()))
        generated = ensure_weights(location)
        verify_manifest(location.directory)
        tensors = load_tensors(location.directory, "cpu", dtype)
        router = None
        if cfg.moe.experts:
            router = ExpertRouter(
                layers=shape.num_layers, hidden=shape.hidden_size, intermediate=shape.intermediate_size,
                experts=cfg.moe.experts, top_k=cfg.moe.top_k, skew=cfg.moe.skew, seed=cfg.seed, device=device,
                dtype=dtype,
            )
        decoder = LlamaDecoder(shape, tensors, device=device, dtype=dtype, router=router)
        del tensors
        tokenizer = load_tokenizer(
            None if location.reference else location.directory, shape.eos_token_id, shape.bos_token_id
        )
        self.state = "warming"
        self._warm_up(decoder)
        if router is not None:
            router.reset()
        self.router = router
        engine = Engine(
            decoder, max_batch_size=cfg.max_batch_size, max_context_length=self.max_context,
            max_waiting=cfg.max_waiting_requests, prefill_chunk_tokens=cfg.prefill_chunk_tokens,
            eos_id=tokenizer.eos_id, banned_ids=tokenizer.banned_ids, emit=self.emit, clock=self.clock,
            seed=cfg.seed,
        )
        engine.start()
        self.tokenizer, self.engine, self.bos_id = tokenizer, engine, shape.bos_token_id
        self.info = ModelInfo(
            name=cfg.model_name, directory=str(location.directory), parameters=shape.param_count(),
            precision=precision_name(dtype), device=str(device), packed_weights=decoder.packed,
            generated=generated, max_context_length=self.max_context,
            load_seconds=round(time.monotonic() - started, 3), tokenizer=tokenizer.name,
        )

    def _warm_up(self, decoder: Any) -> None:
        """One prefill and decode steps at batch 1 and the full batch: kernels, caches and the
        oneDNN primitives are created before the first real request."""
        cache = decoder.new_cache(self.config.max_batch_size, 64)
        decoder.prefill(cache, 0, list(range(1, 17)), 0)
        for n in sorted({1, min(8, self.config.max_batch_size), self.config.max_batch_size}):
            decoder.decode(cache, [1] * n, [16] * n)

    def begin_drain(self) -> None:
        if self.state == "ready":
            self.state = "draining"
        if self.engine is not None:
            self.engine.stop_accepting()

    def shutdown(self, timeout_s: float) -> bool:
        """Finish what was accepted (up to ``timeout_s``), then stop; True if nothing was cut."""
        self.begin_drain()
        drained = True
        if self.engine is not None:
            drained = self.engine.drain(timeout_s)
            self.engine.stop()
        if self.state != "failed":
            self.state = "stopped"
        return drained

    # -- views ------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.state == "ready" and self.engine is not None

    def stats(self) -> EngineStats | None:
        return self.engine.stats() if self.engine is not None else None

    def expert_counts(self) -> list[list[int]] | None:
        """MoE mode: tokens routed so far per layer and expert; None for a dense model."""
        return self.router.counts() if self.router is not None else None


def auto_threads(weight_bytes: int) -> int:
    """CPU threads for ``num_threads: 0``.  One for weights that fit the caches: a tiny model's
    step is per-op overhead, and an OpenMP team only adds wake-ups.  Otherwise every core but
    one: a decode step is a sweep over the weights and more cores stream more bandwidth, but
    the HTTP event loop (and the service next to the worker) need a core too -- an OpenMP team
    that has to wait for a descheduled member stalls every parallel region (measured on a busy
    2-core host: batch-1 decode 6x slower with 2 threads than with 1)."""
    import os

    cores = os.cpu_count() or 1
    return 1 if weight_bytes < 64 * 1024 * 1024 else max(1, cores - 1)


class _Refused(Exception):
    """A refusal whose message is already complete (no exception type prefix)."""


def _clear(exc: Exception) -> bool:
    from worker.weights import ManifestError

    return isinstance(exc, (_Refused, ManifestError, ValueError))
