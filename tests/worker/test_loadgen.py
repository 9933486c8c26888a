"""The load generator: length specs, trace formats (own fixtures in the Azure CSV and Mooncake
JSONL formats), prompts, percentiles, and real runs against a worker on loopback."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
from pathlib import Path

import pytest

from tests.worker.conftest import ThreadWorker, free_port
from worker.cli import register
from worker.loadgen import LoadOptions, run_load
from worker.loadgen.report import percentile
from worker.loadgen.traces import read_trace
from worker.loadgen.workload import BLOCK_TOKENS, LengthDist, from_trace, make_prompt

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2024-05-10 09:00:00.1000000,120,20
2024-05-10 09:00:00.3500000,9000,10
not a time,1,1
2024-05-10 09:00:01.1000000,40,3000
"""
MOONCAKE = """{"timestamp": 1000, "input_length": 1100, "output_length": 7, "hash_ids": [0, 1, 2]}
{"timestamp": 1250, "input_length": 700, "output_length": 5, "hash_ids": [0, 3]}
{"timestamp": "soon", "input_length": 1}

{"timestamp": 1500, "input_length": 30, "output_length": 4, "hash_ids": [4]}
"""


def test_length_specs() -> None:
    rng = random.Random(1)
    assert LengthDist.parse("128").sample(rng) == 128
    assert all(64 <= LengthDist.parse("64-256").sample(rng) <= 256 for _ in range(200))
    normal = [LengthDist.parse("normal:100:10").sample(rng) for _ in range(2000)]
    assert 97 < sum(normal) / len(normal) < 103
    assert LengthDist.parse("exp:50").sample(rng, maximum=60) <= 60
    assert LengthDist.parse("lognormal:100:0.5").mean > 100
    for bad in ("", "abc", "normal:1", "9-3", "exp:x"):
        with pytest.raises(ValueError, match="bad length spec"):
            LengthDist.parse(bad)


def test_azure_trace(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text(AZURE)
    trace = read_trace(path)
    assert [(round(r.at_s, 3), r.prompt_tokens, r.output_tokens) for r in trace.records] == [
        (0.0, 120, 20), (0.25, 9000, 10), (1.0, 40, 3000)]
    assert len(trace.skipped) == 1 and ":4:" in trace.skipped[0]
    specs, clipped = from_trace(trace, speedup=2.0, max_context=8192)
    assert [s.at_s for s in specs] == [0.0, 0.125, 0.5]
    assert clipped == 1 and specs[1].prompt_tokens + specs[1].output_tokens < 8192
    assert specs[2].output_tokens == 3000  # fits as it is


def test_mooncake_trace_and_shared_prefixes(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(MOONCAKE)
    trace = read_trace(path, "auto")
    assert [(r.at_s, r.prompt_tokens, r.blocks) for r in trace.records] == [
        (0.0, 1100, (0, 1, 2)), (0.25, 700, (0, 3)), (0.5, 30, (4,))]
    assert len(trace.skipped) == 1
    a = make_prompt(1100, random.Random(1), (0, 1, 2))
    b = make_prompt(700, random.Random(2), (0, 3))
    assert len(a) == 1100 and len(b) == 700 and a.isascii()
    assert a[:BLOCK_TOKENS] == b[:BLOCK_TOKENS] and a[BLOCK_TOKENS:600] != b[BLOCK_TOKENS:600]


def test_percentiles_interpolate_like_numpy() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.5
    assert percentile(values, 0.99) == pytest.approx(99.01)
    assert percentile([3.0], 0.9) == 3.0


def test_closed_loop_against_the_worker(worker: ThreadWorker) -> None:
    opts = LoadOptions(url=worker.url, concurrency=4, requests=12, prompt=LengthDist.parse("16-48"),
                       output=LengthDist.parse("8"), seed=3)
    report = asyncio.run(run_load(opts))
    assert report.sent == 12 and report.ok == 12 and report.failures == {}
    assert report.output_tokens == 12 * 8
    assert report.ttft.count == 12 and report.itl.count == 12 * 7
    assert report.e2e.p50_ms <= report.e2e.p90_ms <= report.e2e.p99_ms
    assert report.req_per_s > 0 and report.output_tokens_per_s > 0
    assert "TTFT" in report.table() and json.loads(json.dumps(report.to_dict()))["ok"] == 12


def test_open_loop_and_completions_endpoint(worker: ThreadWorker) -> None:
    opts = LoadOptions(url=worker.url, endpoint="completions", rate=40.0, requests=10, output=LengthDist.parse("5"),
                       prompt=LengthDist.parse("20"), model="ref-tiny")
    report = asyncio.run(run_load(opts))
    assert report.ok == 10 and report.output_tokens == 50 and report.mode.startswith("open loop")
    plain = asyncio.run(run_load(LoadOptions(url=worker.url, requests=3, stream=False, output=LengthDist.parse("6"))))
    assert plain.ok == 3 and plain.ttft.count == 3 and plain.itl.count == 15  # from the server's timings


def test_trace_replay_cli_with_json(worker: ThreadWorker, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(MOONCAKE)
    parser = argparse.ArgumentParser()
    parser.add_argument("--config")
    register(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    args = parser.parse_args(["load", "--url", worker.url, "--trace", str(trace), "--speedup", "5",
                              "--json", "-", "--no-progress"])
    assert args.func(args, out, err) == 0
    text = out.getvalue()
    report = json.loads(text[text.index("{"):])
    assert report["sent"] == 3 and report["ok"] == 3 and report["mode"] == "trace replay x5"
    assert report["output_tokens"] == 7 + 5 + 4
    assert "unreadable trace lines skipped" in " ".join(report["notes"])


def test_failures_are_counted_by_cause() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    report = asyncio.run(run_load(LoadOptions(url=dead, concurrency=2, requests=4, timeout_s=2)))
    assert report.ok == 0 and report.failures == {"connect": 4}
    assert "connect" in report.table()


def test_progress_bar_only_when_asked_or_a_terminal() -> None:
    from worker.loadgen.progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet = io.StringIO()
    Progress(quiet, total=3).update(1, 0, 0.1)  # a StringIO is not a terminal
    assert quiet.getvalue() == ""
    off = Tty()
    Progress(off, total=3, enabled=False).update(1, 0, 0.1)  # --no-progress on a terminal
    assert off.getvalue() == ""
    unused = Tty()
    Progress(unused, total=3).close()  # nothing was shown: nothing to end
    assert unused.getvalue() == ""

    shown = io.StringIO()  # asked for on a pipe: the final line once, no redraws
    bar = Progress(shown, total=4, enabled=True)
    for done in (1, 2, 3):
        bar.update(done, 0, done * 0.01)
    bar.close()
    text = shown.getvalue()
    assert "3 done, 0 failed,    0.0 s, 100.00 req/s" in text and text.endswith("\n")
    assert "1 done" not in text and "\x1b" not in text and "\r" not in text
    assert "\u2501" in text  # rich's bar (a request total is known)

    live = Tty()  # a terminal: redrawn in place with cursor control, then the line is ended
    bar = Progress(live, duration_s=10.0)
    bar.update(2, 1, 5.0)
    bar.close()
    text = live.getvalue()
    assert "0 done" not in text and "\x1b[" in text
    assert "2 done, 1 failed,    5.0 s,   0.40 req/s\n" in text
