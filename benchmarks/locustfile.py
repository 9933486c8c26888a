"""Locust users for the reference worker, or any server with ``/v1/generate`` or OpenAI
``/v1/completions`` -- for people who prefer locust to ``infermeter load`` (seed 000 §3.3 runs
its baseline with locust: many concurrent users for an hour).

Run (locust is not a dependency of infermeter; ``pip install locust``)::

    locust -f benchmarks/locustfile.py --host http://127.0.0.1:8080 \
        --users 200 --spawn-rate 20 --run-time 1h --headless --csv results/worker

Environment knobs: ``WORKER_ENDPOINT`` (``generate`` or ``completions``, default generate),
``WORKER_PROMPT_TOKENS`` (default 128), ``WORKER_OUTPUT_TOKENS`` (64), ``WORKER_MODEL`` (for
completions), ``WORKER_THINK_S`` (pause between a user's requests, default 0).

Besides the request itself (end-to-end time), each streamed request reports a ``TTFT`` entry
(time to first token) and an ``ITL`` entry (mean inter-token latency of the request) to
locust's statistics, so P50/P99 of both appear in its tables and CSVs.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

try:  # locust stays optional: importing this file without it explains what to install
    from locust import HttpUser, constant, task
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("benchmarks/locustfile.py needs locust: pip install locust") from exc

ENDPOINT = os.environ.get("WORKER_ENDPOINT", "generate")
PROMPT_TOKENS = int(os.environ.get("WORKER_PROMPT_TOKENS", "128"))
OUTPUT_TOKENS = int(os.environ.get("WORKER_OUTPUT_TOKENS", "64"))
MODEL = os.environ.get("WORKER_MODEL", "ref-tiny")
THINK_S = float(os.environ.get("WORKER_THINK_S", "0"))
WORDS = "the gpu token cache batch model serve queue decode prefill latency memory bandwidth node fleet".split()


def prompt(n: int, rng: random.Random) -> str:
    text = ""
    while len(text) < n:
        text += rng.choice(WORDS) + " "
    return text[:n]


class WorkerUser(HttpUser):  # type: ignore[misc]
    wait_time = constant(THINK_S)

    def on_start(self) -> None:
        self.rng = random.Random()

    def _fire(self, name: str, ms: float) -> None:
        self.environment.events.request.fire(
            request_type="STREAM", name=name, response_time=ms, response_length=0, exception=None, context={}
        )

    @task
    def generate(self) -> None:
        body: dict[str, Any] = {"prompt": prompt(PROMPT_TOKENS, self.rng), "max_tokens": OUTPUT_TOKENS,
                                "stream": True, "ignore_eos": True}
        path = "/v1/generate" if ENDPOINT == "generate" else "/v1/completions"
        if ENDPOINT != "generate":
            body["model"] = MODEL
        start = time.perf_counter()
        first: float | None = None
        last = start
        tokens = 0
        with self.client.post(path, json=body, stream=True, catch_response=True, name=path) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")
                return
            for raw in response.iter_lines():
                line = raw.decode() if isinstance(raw, bytes) else raw
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    response.failure(str(event["error"].get("message")))
                    return
                n = int(event.get("tokens", 1 if event.get("choices") else 0))
                if n:
                    last = time.perf_counter()
                    first = first or last
                    tokens += n
            response.success()
        if first is not None:
            self._fire("TTFT", (first - start) * 1000)
            if tokens > 1:
                self._fire("ITL", (last - first) * 1000 / (tokens - 1))
