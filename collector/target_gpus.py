"""Which GPUs an inference engine runs on, as series: ``infermeter_target_gpu_info``.

Per-GPU throughput is the engine's tokens/s over the GPUs that engine runs on, and a GPU's cost
belongs to the model its engine serves. A /metrics endpoint does not say which GPUs serve it,
so the link is written as an info series (value 1) per (engine target, GPU), from either

* the config (``scrape.targets[].gpus``): written by the target's own scrape loop, or
* NVML's running processes on this host matched to the engine's process tree
  (:mod:`collector.nvml.attribution`): written by the GPU source.

Labels: ``target_job`` and ``target_instance`` (the engine target's ``job`` and ``instance``),
``gpu`` (an index or UUID), ``source`` (``config`` | ``nvml``), and from NVML also ``uuid`` and
``host``. The cost ledger (``cost/ledger.py``) reads it; being series, it travels with remote
write like everything else, so an agent's NVML matching reaches a central ledger.
"""

from __future__ import annotations

from store.types import SeriesKey

TARGET_GPU_INFO = "infermeter_target_gpu_info"


def target_gpu_key(
    job: str, instance: str, gpu: str, source: str, extra: tuple[tuple[str, str], ...] = ()
) -> SeriesKey:
    labels = {**dict(extra), "target_job": job, "target_instance": instance, "gpu": gpu, "source": source}
    return SeriesKey(TARGET_GPU_INFO, tuple(sorted(labels.items())))
