"""Which engine exported a scrape, told from the metric names it contains.

Why by name prefix: every supported exporter namespaces its families (``vllm:``, ``sglang:``,
``tgi_``, ``nv_inference_``/``nv_gpu_``/``nv_trt_llm_``, ``DCGM_FI_``), while the generic
families they share (``process_*``, ``python_gc_*``, ``http_requests_total``) say nothing.
Counting distinct names per engine and taking the largest count is stable against a stray
family from another exporter (a sidecar or federation); ties go to the inference servers, in
the order of :data:`ENGINE_ORDER`, before dcgm.  Old dcgm-exporter naming (``dcgm_*``, with
``--use-old-namespace``) is recognised as dcgm even though none of it is mapped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Engine = Literal["vllm", "sglang", "tgi", "triton", "dcgm", "unknown"]
KnownEngine = Literal["vllm", "sglang", "tgi", "triton", "dcgm"]

ENGINE_ORDER: tuple[KnownEngine, ...] = ("vllm", "sglang", "tgi", "triton", "dcgm")

PREFIXES: dict[KnownEngine, tuple[str, ...]] = {
    "vllm": ("vllm:",),
    "sglang": ("sglang:",),
    "tgi": ("tgi_",),
    "triton": (
        "nv_inference_",
        "nv_trt_llm_",
        "nv_gpu_",
        "nv_energy_",
        "nv_cpu_",
        "nv_cache_",
        "nv_pinned_memory_pool_",
    ),
    "dcgm": ("DCGM_FI_", "DCGM_EXP_", "dcgm_"),
}

_ALL_PREFIXES: tuple[str, ...] = tuple(p for e in ENGINE_ORDER for p in PREFIXES[e])


def _engine_of(name: str) -> KnownEngine | None:
    for engine in ENGINE_ORDER:
        if name.startswith(PREFIXES[engine]):
            return engine
    return None


def detect_engine(names: Iterable[str]) -> Engine:
    """The engine most of the namespaced metric names belong to; ``"unknown"`` if none is."""
    counts: dict[KnownEngine, int] = {}
    for name in set(names):
        if name.startswith(_ALL_PREFIXES):
            engine = _engine_of(name)
            if engine is not None:
                counts[engine] = counts.get(engine, 0) + 1
    if not counts:
        return "unknown"
    best = max(counts.values())
    return next(e for e in ENGINE_ORDER if counts.get(e) == best)
