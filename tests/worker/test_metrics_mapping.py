"""The worker's /metrics, fetched over HTTP, goes through the collector's vLLM mapping into the
canonical metrics -- the collector scrapes this worker exactly like a vLLM server."""

from __future__ import annotations

import concurrent.futures
import time

import httpx

from collector.exposition import parse_exposition
from collector.mapping import CanonicalMapper, detect_engine
from tests.worker.conftest import WorkerFactory


def _canonical(body: str) -> dict[str, float]:
    batch = parse_exposition(body, default_ts_ms=int(time.time() * 1000)).batch
    assert detect_engine(k.name for k in batch.keys) == "vllm"
    out = CanonicalMapper().map(batch)
    return {s.series.canonical(): s.value for s in out.samples()}


def test_metrics_map_to_canonical(make_worker: WorkerFactory) -> None:
    w = make_worker(max_batch_size=2, max_waiting_requests=0, timeout_ms=500)
    with httpx.Client(base_url=w.url, timeout=30) as http:
        for i in range(3):
            r = http.post("/v1/generate", json={"prompt": f"req {i}", "max_tokens": 6, "ignore_eos": True})
            assert r.status_code == 200
        # two long requests time out (504), a third is rejected (429)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            long = {"prompt": "x", "max_tokens": 4000, "ignore_eos": True}
            futures = [pool.submit(http.post, "/v1/generate", json=long) for _ in range(2)]
            while w.service.runtime.engine.in_system < 2:
                time.sleep(0.005)
            assert http.post("/v1/generate", json=long).status_code == 429
            assert [f.result().status_code for f in futures] == [504, 504]
        body = http.get("/metrics")
    assert body.status_code == 200 and body.headers["content-type"].startswith("text/plain")
    text = body.text
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
                 "vllm:e2e_request_latency_seconds_bucket"):
        assert name + "{" in text, name
    canon = _canonical(text)

    def value(name: str, outcome: str | None = None) -> float:
        extra = f',outcome="{outcome}"' if outcome else ""
        key = f'{name}{{engine="vllm",model="ref-tiny"{extra}}}'
        assert key in canon, f"{key} missing from {sorted(canon)}"
        return canon[key]

    assert value("inference_requests_total", "success") == 3.0
    assert value("inference_requests_total", "failure") == 2.0  # the two timeouts
    assert value("inference_requests_total", "abort") == 0.0
    assert value("inference_prompt_tokens_total") == sum(len(f"req {i}") for i in range(3)) + 2
    assert value("inference_generation_tokens_total") >= 3 * 6
    assert value("inference_time_to_first_token_seconds_count") == 5.0  # the timed-out ones got a first token
    assert value("inference_e2e_request_latency_seconds_count") == 5.0
    assert value("inference_inter_token_latency_seconds_count") >= 3 * 5
    assert any(k.startswith("inference_time_to_first_token_seconds_bucket{") for k in canon)
    assert value("inference_requests_running") == 0.0
    assert value("inference_requests_waiting") == 0.0
    assert 0.0 <= value("inference_kv_cache_usage_ratio") <= 1.0
