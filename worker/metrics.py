"""``/metrics`` with vLLM's names, label shape and histogram buckets (V1 engine, 0.33.0).

Every engine family carries ``model_name`` and ``engine="0"`` as vLLM's do, so the collector
scrapes this worker exactly like a vLLM server (FORMATS.md §2.1).  Finished requests count in
``vllm:request_success_total{finished_reason}`` with vLLM's reasons: stop, length, abort, and
error -- our timeouts and internal failures are ``error``, which the canonical mapping reads as
failures.  The cause is kept in ``infermeter_worker_request_failures_total{cause}``:
``timeout`` (504), ``queue_full`` (429), ``invalid_request`` (422), ``draining`` / ``not_ready``
(503), ``internal`` (500).  HTTP requests are counted as prometheus-fastapi-instrumentator does
for vLLM (``http_requests_total{handler,method,status="2xx"}``).

A registry per app (nothing global); gauges are read from the engine at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from worker.events import EngineStats, FinishEvent, FinishReason

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
)
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)
VLLM_REASON: dict[FinishReason, str] = {
    "stop": "stop", "length": "length", "abort": "abort", "timeout": "error", "error": "error",
}
FAILURE_CAUSE: dict[FinishReason, str] = {"timeout": "timeout", "error": "internal"}


def buckets_1_2_5(limit: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series up to ``limit`` (token-count histograms)."""
    out: list[float] = []
    exp = 1
    while True:
        for m in (1, 2, 5):
            value = m * exp
            if value > limit:
                return tuple(out)
            out.append(float(value))
        exp *= 10


class _EngineGauges(Collector):
    def __init__(self, labels: dict[str, str], stats: Callable[[], EngineStats | None]) -> None:
        self._labels = labels
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = self._stats()
        names, values = list(self._labels), list(self._labels.values())
        rows = (
            ("vllm:num_requests_running", "Number of requests in model execution batches.", "running"),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "waiting"),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv_usage"),
        )
        for name, doc, attr in rows:
            family = GaugeMetricFamily(name, doc, labels=names)
            family.add_metric(values, float(getattr(stats, attr)) if stats is not None else 0.0)
            yield family


class _ExpertCounts(Collector):
    """MoE mode: ``moe_expert_tokens_total{layer,expert}``, read from the router at scrape time."""

    def __init__(self, labels: dict[str, str], counts: Callable[[], list[list[int]] | None]) -> None:
        self._labels = labels
        self._counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        counts = self._counts()
        if counts is None:
            return
        family = CounterMetricFamily(
            "moe_expert_tokens", "Tokens routed to each expert of each MoE layer (once per expert a token goes to).",
            labels=[*self._labels, "layer", "expert"],
        )
        values = list(self._labels.values())
        for layer, row in enumerate(counts):
            for expert, count in enumerate(row):
                family.add_metric([*values, str(layer), str(expert)], float(count))
        yield family


class WorkerMetrics:
    def __init__(
        self, model_name: str, max_context: int, stats: Callable[[], EngineStats | None],
        registry: CollectorRegistry | None = None, expert_counts: Callable[[], list[list[int]] | None] | None = None,
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r, labels = self.registry, {"model_name": model_name, "engine": "0"}
        names = ["model_name", "engine"]
        self.labels = labels

        def counter(name: str, doc: str, extra: Iterable[str] = ()) -> Counter:
            return Counter(name, doc, [*names, *extra], registry=r)

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:  # the labelled child
            return Histogram(name, doc, names, buckets=buckets, registry=r).labels(**labels)

        r.register(_EngineGauges(labels, stats))
        if expert_counts is not None:
            r.register(_ExpertCounts(labels, expert_counts))
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.").labels(**labels)
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.").labels(**labels)
        self.success = counter("vllm:request_success", "Count of successfully processed requests.", ["finished_reason"])
        self.rejections = Counter(
            "vllm:admission_rejections", "Requests rejected at admission.", ["model_name", "reason"], registry=r
        )
        self.failures = Counter(
            "infermeter_worker_request_failures", "Failed requests by cause.", ["model_name", "cause"], registry=r
        )
        self.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS)
        self.tpot = hist(
            "vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", LATENCY_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", LATENCY_BUCKETS)
        self.inference = hist(
            "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", LATENCY_BUCKETS
        )
        self.prefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", LATENCY_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", LATENCY_BUCKETS)
        tokens = buckets_1_2_5(max_context)
        self.req_prompt = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
        self.req_generation = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokens)
        self.req_max_tokens = hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens)
        self.http = Counter("http_requests", "Total number of requests by method, status and handler.",
                            ["handler", "method", "status"], registry=r)
        self.model_name = model_name
        for reason in ("stop", "length", "abort", "error"):  # present from the start, like vLLM's
            self.success.labels(**labels, finished_reason=reason)
        for cause in ("timeout", "queue_full", "invalid_request", "internal"):
            self.failures.labels(model_name=model_name, cause=cause)

    def tokens(self, prompt: int, generated: int) -> None:
        if prompt:
            self.prompt_tokens.inc(prompt)
        if generated:
            self.generation_tokens.inc(generated)

    def finished(self, ev: FinishEvent, max_tokens: int) -> None:
        labels = self.labels
        self.success.labels(**labels, finished_reason=VLLM_REASON[ev.reason]).inc()
        cause = FAILURE_CAUSE.get(ev.reason)
        if cause is not None:
            self.failures.labels(model_name=self.model_name, cause=cause).inc()
        t = ev.timings
        end = t.finished if t.finished is not None else t.arrival
        self.e2e.observe(max(0.0, end - t.arrival))
        if t.scheduled is not None:
            self.queue.observe(t.scheduled - t.arrival)
            self.inference.observe(max(0.0, end - t.scheduled))
            self.prefill.observe(t.prefill_s)
        self.req_max_tokens.observe(max_tokens)
        if t.first_token is None:
            return
        self.req_prompt.observe(ev.prompt_tokens)
        self.req_generation.observe(ev.completion_tokens)
        self.ttft.observe(t.first_token - t.arrival)
        self.decode.observe(max(0.0, end - t.first_token))
        times = t.token_times
        for a, b in zip(times, times[1:]):
            self.itl.observe(b - a)
        if len(times) > 1:
            self.tpot.observe((times[-1] - times[0]) / (len(times) - 1))

    def failed(self, cause: str) -> None:
        self.failures.labels(model_name=self.model_name, cause=cause).inc()
        if cause == "queue_full":
            self.rejections.labels(model_name=self.model_name, reason="max_num_queued_reqs").inc()

    def http_request(self, handler: str, method: str, status: int) -> None:
        self.http.labels(handler=handler, method=method, status=f"{status // 100}xx").inc()
