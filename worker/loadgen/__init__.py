"""Load generator (``infermeter load``): closed-loop users or open-loop Poisson arrivals, fixed or
distributed lengths, or trace replay; a report of throughput and latency percentiles.

Talks HTTP (httpx, async) to any server with the worker's ``/v1/generate`` or an OpenAI
``/v1/completions`` endpoint (vLLM, SGLang, TGI's OpenAI route...).  No torch.
"""

from worker.loadgen.report import LoadReport
from worker.loadgen.runner import LoadOptions, run_load

__all__ = ["LoadOptions", "LoadReport", "run_load"]
