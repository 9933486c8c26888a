"""The worker over real HTTP on loopback: health gating, generate, streaming, OpenAI completions,
422 / 429 / 504, and the spans of a request."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import httpx
import pytest

from tests.worker.conftest import ThreadWorker, WorkerFactory, sse_events


def test_health_is_503_until_loaded_then_200(make_worker: WorkerFactory) -> None:
    gate = threading.Event()
    w = make_worker(wait_ready=False, app_kwargs={"gate": gate})
    with httpx.Client(base_url=w.url, timeout=10) as http:
        r = http.get("/health")
        assert r.status_code == 503
        assert r.json()["status"] == "starting"
        assert http.post("/v1/generate", json={"prompt": "hi", "max_tokens": 2}).status_code == 503
        gate.set()
        deadline = time.monotonic() + 30
        while http.get("/health").status_code != 200:
            assert time.monotonic() < deadline, "never became healthy"
            time.sleep(0.05)
        body = http.get("/health").json()
        assert body["status"] == "ok" and body["precision"] == "fp32" and body["parameters"] > 0
        assert http.post("/v1/generate", json={"prompt": "hi", "max_tokens": 2}).status_code == 200


def test_custom_health_path(make_worker: WorkerFactory) -> None:
    w = make_worker(health_check_path="/healthz")
    assert httpx.get(w.url + "/healthz").status_code == 200
    assert httpx.get(w.url + "/health").status_code == 404


def test_generate_returns_text_usage_and_timings(http: httpx.Client) -> None:
    r = http.post("/v1/generate", json={"prompt": "用一句话介绍你自己", "max_tokens": 12, "ignore_eos": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body["text"], str)
    assert body["usage"] == {"prompt_tokens": len("用一句话介绍你自己".encode()), "completion_tokens": 12,
                             "total_tokens": len("用一句话介绍你自己".encode()) + 12}
    assert body["finish_reason"] == "length"
    t = body["timings"]
    assert 0 <= t["queue_ms"] <= t["ttft_ms"] <= t["e2e_ms"]


def test_same_seed_same_text_and_greedy_is_deterministic(http: httpx.Client) -> None:
    def text(**extra: object) -> str:
        r = http.post("/v1/generate", json={"prompt": "abc", "max_tokens": 16, "ignore_eos": True, **extra})
        assert r.status_code == 200
        return str(r.json()["text"])

    assert text(seed=7) == text(seed=7)
    assert text(temperature=0) == text(temperature=0)


def test_streaming_sends_tokens_then_usage_then_done(http: httpx.Client) -> None:
    body = {"prompt": "stream me", "max_tokens": 20, "ignore_eos": True, "seed": 3}
    r = http.post("/v1/generate", json={**body, "stream": True})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    final = events[-2]
    assert final["finish_reason"] == "length" and final["usage"]["completion_tokens"] == 20
    chunks = events[:-2]
    assert sum(e["tokens"] for e in chunks) == 20
    streamed = "".join(e["text"] for e in chunks)
    assert streamed == http.post("/v1/generate", json=body).json()["text"]  # same seed, same text


def test_openai_completions_shape(http: httpx.Client) -> None:
    r = http.post("/v1/completions", json={"model": "ref-tiny", "prompt": "Hello", "max_tokens": 5,
                                           "temperature": 0, "ignore_eos": True, "top_p": 0.9, "user": "x"})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert body["choices"][0]["finish_reason"] == "length" and body["choices"][0]["index"] == 0
    assert body["usage"]["completion_tokens"] == 5 and body["usage"]["prompt_tokens"] == 5
    r = http.post("/v1/completions", json={"prompt": ["Hello"], "max_tokens": 4, "ignore_eos": True, "stream": True,
                                           "stream_options": {"include_usage": True}})
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 4
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert http.get("/v1/models").json()["data"][0]["id"] == "ref-tiny"
    from infermeter import __version__

    assert http.get("/version").json() == {"version": __version__, "engine": "infermeter-worker"}  # as vLLM's /version


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "max_tokens": 100_000}, "max_tokens"),  # > max_tokens_limit / context left
        ({"prompt": "x", "max_tokens": "many"}, "max_tokens"),
        ({"max_tokens": 4}, "prompt"),
        ({"prompt": "x", "temperature": -1}, "temperature"),
        ({"prompt": "x" * 9000, "max_tokens": 4}, "prompt"),  # longer than max_context_length
    ],
)
def test_422_names_the_field(http: httpx.Client, body: dict[str, object], param: str) -> None:
    r = http.post("/v1/generate", json=body)
    assert r.status_code == 422
    assert r.json()["error"]["param"] == param
    assert param in r.json()["error"]["message"]


def test_422_for_bad_json(http: httpx.Client) -> None:
    r = http.post("/v1/generate", content=b'{"prompt": "x", ', headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["error"]["param"] == "body" and "JSON" in r.json()["error"]["message"]


def test_429_when_the_queue_is_full_and_504_past_the_deadline(make_worker: WorkerFactory) -> None:
    # one running + one waiting fill the system; each takes longer than timeout_ms
    w = make_worker(max_batch_size=1, max_waiting_requests=1, timeout_ms=400)
    long = {"prompt": "x", "max_tokens": 4000, "ignore_eos": True}
    with httpx.Client(base_url=w.url, timeout=30) as http, concurrent.futures.ThreadPoolExecutor(2) as pool:
        running = pool.submit(http.post, "/v1/generate", json=long)
        while w.service.runtime.stats().running < 1:
            time.sleep(0.005)
        waiting = pool.submit(http.post, "/v1/generate", json=long)
        while w.service.runtime.engine.in_system < 2:
            time.sleep(0.005)
        rejected = http.post("/v1/generate", json=long)
        assert rejected.status_code == 429
        assert int(rejected.headers["Retry-After"]) >= 1
        for future in (running, waiting):
            r = future.result()
            assert r.status_code == 504, r.text
            assert r.json()["error"]["type"] == "timeout"
        metrics = http.get("/metrics").text
    assert 'infermeter_worker_request_failures_total{cause="timeout",model_name="ref-tiny"} 2.0' in metrics
    assert 'infermeter_worker_request_failures_total{cause="queue_full",model_name="ref-tiny"} 1.0' in metrics
    assert 'vllm:request_success_total{engine="0",finished_reason="error",model_name="ref-tiny"} 2.0' in metrics


def test_stream_timeout_after_first_token_ends_with_error_event(make_worker: WorkerFactory) -> None:
    w = make_worker(timeout_ms=300)
    r = httpx.post(w.url + "/v1/generate", json={"prompt": "x", "max_tokens": 4000, "ignore_eos": True,
                                                 "stream": True}, timeout=30)
    assert r.status_code == 200
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    assert events[-2]["error"]["type"] == "timeout"


def test_spans_per_request(make_worker: WorkerFactory) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    w = make_worker(app_kwargs={"span_exporter": exporter})
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = httpx.post(w.url + "/v1/generate", json={"prompt": "trace", "max_tokens": 3}, headers={"traceparent": parent})
    assert r.status_code == 200
    deadline = time.monotonic() + 5
    while len(exporter.get_finished_spans()) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"generate", "queue", "prefill", "decode"}
    root = spans["generate"]
    assert f"{root.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"

    def times(name: str) -> tuple[int, int]:
        start, end = spans[name].start_time, spans[name].end_time
        assert start is not None and end is not None
        return start, end

    r0, r1 = times("generate")
    for name in ("queue", "prefill", "decode"):
        up = spans[name].parent
        assert up is not None and up.span_id == root.context.span_id
        start, end = times(name)
        assert r0 <= start <= end <= r1
    assert times("queue")[1] <= times("prefill")[0] + 1 and times("prefill")[1] <= times("decode")[0] + 1
    assert root.attributes is not None and root.attributes["gen_ai.usage.output_tokens"] == r.json()["usage"]["completion_tokens"]


def test_concurrent_requests_share_decode_steps(worker: ThreadWorker, http: httpx.Client) -> None:
    steps_before = worker.service.runtime.stats().steps
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(http.post, "/v1/generate", json={"prompt": f"p{i}", "max_tokens": 40, "ignore_eos": True})
                   for i in range(8)]
        results = [f.result() for f in futures]
    assert all(r.status_code == 200 for r in results)
    steps = worker.service.runtime.stats().steps - steps_before
    assert steps < 8 * 40 * 0.75, f"{steps} engine iterations for 8 x 40 tokens: not batched"


def test_a_hugging_face_checkpoint_directory_serves(make_worker: WorkerFactory, model_dir: object) -> None:
    """model_path may name a checkpoint directory (here: the reference one, with its SHA256SUMS)."""
    from pathlib import Path

    directory = Path(str(model_dir)) / "ref-tiny"
    w = make_worker(model_path=str(directory))
    health = httpx.get(w.url + "/health").json()
    assert health["directory"] == str(directory) and health["generated"] is False
    r = httpx.post(w.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 3, "ignore_eos": True})
    assert r.status_code == 200 and r.json()["model"] == str(directory)
