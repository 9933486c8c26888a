"""``evaluate``: two real workers over loopback HTTP, one batching 8 requests and one serving them
one at a time (standing in for two GPU types at different prices), ranked by $ per 1M tokens from
what was measured; an unreachable candidate keeps its row with why."""

from __future__ import annotations

import math

import pytest

from cost.prices import CostSettings, PriceBook
from infermeter.evaluate import Candidate, Sla, evaluate_sync, render
from tests.service import free_port
from worker.loadgen import LoadOptions
from worker.loadgen.workload import LengthDist

T0 = 1_800_000_000_000
BOOK = PriceBook(CostSettings.model_validate({"gpu_prices": [
    {"gpu_model": "H100", "dollars_per_gpu_hour": 4.0},
    {"gpu_model": "A100", "dollars_per_gpu_hour": 2.0},
]}))


def test_ranked_by_measured_cost_per_token(make_worker) -> None:  # type: ignore[no-untyped-def]
    batched = make_worker(max_batch_size=8)
    single = make_worker(max_batch_size=1)
    dead = f"http://127.0.0.1:{free_port()}"
    candidates = [Candidate("single-a100", single.url, "A100"), Candidate("batched-h100", batched.url, "H100"),
                  Candidate("gone", dead, "A100")]
    workload = LoadOptions(concurrency=8, requests=48, prompt=LengthDist.parse("16"), output=LengthDist.parse("16"),
                           seed=3, warmup=2, timeout_s=60, failure_backoff_s=0.05)
    result = evaluate_sync(candidates, workload, BOOK, T0, Sla(max_failure_rate=0.0))
    rows = {r.candidate.name: r for r in result.rows}
    for name, rate in (("single-a100", 2.0), ("batched-h100", 4.0)):
        r = rows[name]
        assert r.report is not None and r.report.ok == 48 and not r.error
        expected = rate / (r.report.output_tokens_per_s * 3600) * 1e6
        assert r.dollars_per_million == pytest.approx(expected)
    # batching 8 requests outruns one at a time by more than the price doubles
    assert rows["batched-h100"].report.output_tokens_per_s > 2 * rows["single-a100"].report.output_tokens_per_s  # type: ignore[union-attr]
    ranked = [r.candidate.name for r in result.ranked()]
    assert ranked == ["batched-h100", "single-a100", "gone"]
    assert result.best() is rows["batched-h100"]
    assert rows["gone"].error.startswith("no successful request: connect") and math.isnan(rows["gone"].dollars_per_million)
    text = render(result, "table")
    assert "met (cheapest)" in text and "cheapest meeting the SLA: batched-h100" in text
    csv_text = render(result, "csv")
    assert csv_text.splitlines()[0].startswith("rank,candidate,gpu,gpus,class,dollars_per_h") and len(csv_text.splitlines()) == 4


def test_sla_misses_and_candidate_parsing() -> None:
    c = Candidate.parse("name=h100-tp2,url=http://10.0.0.1:8000/,gpu=H100,gpus=2,class=spot,endpoint=completions,model=m")
    assert (c.url, c.gpus, c.purchase_class, c.endpoint, c.model) == ("http://10.0.0.1:8000", 2, "spot", "completions", "m")
    for bad, why in (("url=x", "gpu= is required"), ("url=x,gpu=H100,gpus=0", "at least 1"),
                     ("url=x,gpu=H100,class=cheap", "class must be one of"), ("url=x,gpu=H100,colour=red", "unknown keys"),
                     ("url=x,gpu", "key=value")):
        with pytest.raises(ValueError, match=why):
            Candidate.parse(bad)


def test_ctrl_c_keeps_the_candidates_already_measured() -> None:
    from worker.loadgen import LoadReport
    from worker.loadgen.client import RequestResult

    calls = []

    async def run(opts: LoadOptions) -> LoadReport:
        calls.append(opts.url)
        if len(calls) == 2:
            raise KeyboardInterrupt
        done = [RequestResult(True, i * 0.1, 0.5, ttft_s=0.05, itl_s=[0.01] * 9, output_tokens=10) for i in range(20)]
        return LoadReport.build(done, 2.5, opts.url, "closed loop")

    candidates = [Candidate("first", "http://a:1", "H100"), Candidate("second", "http://b:1", "A100"),
                  Candidate("third", "http://c:1", "A100")]
    result = evaluate_sync(candidates, LoadOptions(requests=20), BOOK, T0, Sla(), run)
    assert result.interrupted and [r.candidate.name for r in result.rows] == ["first"]
    assert result.rows[0].dollars_per_million == pytest.approx(4.0 / (200 / 2.5 * 3600) * 1e6)
    assert "interrupted: 1 of 3 candidates measured" in render(result, "table")
