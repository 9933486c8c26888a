"""``infermeter validate``: the acceptance check of MISSION.md (seed 000 §3.3, seed 004 step 5)
against an OpenAI-compatible ``/v1/completions`` or the worker's ``/v1/generate``.

Phases, each a list of checks with a verdict (pass / fail / not measurable, with why):

1. **function** — ``requests`` distinct seeded prompts (every 10th streamed): no 5xx or transport
   failure, well-formed JSON / SSE, completion tokens within ``max_tokens``, and, where the answer
   names its model, routing to the model asked for (≥ 99.9 %). Every failure is listed with its
   request id and reason.
2. **performance** — a closed-loop load phase (``load``'s runner): TTFT, ITL and end-to-end P99
   against the default pack's SLAs, failure rate against its threshold.
3. **fleet** — read from the store for the run's window (nodes serving the endpoint: the host of
   its URL, loopback meaning this node): mean GPU utilization (≥ ``utilization_target`` under load),
   peak GPU memory; cost per 1M tokens against the per-token budget and the previous accepted run;
   MoE routing's Jensen-Shannon divergence from uniform where expert counts exist.

A check that cannot be measured (no GPU series, no ledger yet, an engine that names no model) is
"not measurable" and does not fail the run; any failed check does (exit 1).
"""

from __future__ import annotations

import asyncio
import html
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import httpx

from worker.loadgen import LoadOptions, LoadReport, run_load
from worker.loadgen.client import PATHS, request_body, send
from worker.loadgen.workload import make_prompt

Verdict = Literal["pass", "fail", "not measurable"]
ROUTING_GOAL = 0.999


@dataclass
class Check:
    name: str
    verdict: Verdict
    measured: str
    goal: str
    why: str = ""


@dataclass
class Failure:
    request_id: str
    reason: str


@dataclass
class Result:
    url: str
    model: str
    started_ms: int
    ended_ms: int = 0
    checks: list[Check] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)  # the function phase's, each named
    load: dict[str, Any] | None = None
    interrupted: bool = False

    @property
    def verdict(self) -> Verdict:
        return "fail" if any(c.verdict == "fail" for c in self.checks) or self.interrupted else "pass"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}

    def markdown(self) -> str:
        head = f"# Acceptance check: {self.verdict.upper()}\n\n`{self.url}`" + (f", model `{self.model}`" if self.model else "")
        rows = ["| check | verdict | measured | goal | why |", "|---|---|---|---|---|"]
        rows += [f"| {c.name} | {c.verdict} | {c.measured} | {c.goal} | {c.why} |" for c in self.checks]
        tail = [f"\n{len(self.failures)} failed requests" + (" (first 50):" if len(self.failures) > 50 else ":")]
        tail += [f"- `{f.request_id}`: {f.reason}" for f in self.failures[:50]]
        note = ["\n**Interrupted**: the checks above are what was measured before the stop."] if self.interrupted else []
        return "\n".join([head, "", *rows, *(tail if self.failures else []), *note]) + "\n"

    def html(self) -> str:
        """A standalone page with the same content as :meth:`markdown`."""
        e = html.escape
        colour = {"pass": "#1e6b1e", "fail": "#8a1c13", "not measurable": "#777"}
        rows = "".join(
            f"<tr><td>{e(c.name)}</td><td style='color:{colour[c.verdict]};font-weight:600'>{e(c.verdict)}</td>"
            f"<td>{e(c.measured)}</td><td>{e(c.goal)}</td><td>{e(c.why)}</td></tr>" for c in self.checks)
        failed = "".join(f"<li><code>{e(f.request_id)}</code>: {e(f.reason)}</li>" for f in self.failures[:200])
        return (f"<!doctype html><html><head><meta charset='utf-8'><title>Acceptance check: {self.verdict}</title>"
                "<style>body{font-family:sans-serif}td,th{border:1px solid #ddd;padding:4px 8px}"
                "table{border-collapse:collapse}</style></head><body>"
                f"<h1>Acceptance check: {e(self.verdict.upper())}</h1><p><code>{e(self.url)}</code>"
                + (f", model <code>{e(self.model)}</code>" if self.model else "") + "</p>"
                "<table><tr><th>check</th><th>verdict</th><th>measured</th><th>goal</th><th>why</th></tr>"
                f"{rows}</table>"
                + (f"<h2>{len(self.failures)} failed requests</h2><ul>{failed}</ul>" if self.failures else "")
                + ("<p><strong>Interrupted</strong>: the checks above are what was measured before the stop.</p>"
                   if self.interrupted else "") + "</body></html>\n")


@dataclass(frozen=True)
class Options:
    url: str
    endpoint: Literal["generate", "completions", "chat"] = "completions"
    models: tuple[str, ...] = ()  # several: requests alternate between them (a gateway's routing)
    requests: int = 1000
    concurrency: int = 16
    max_tokens: int = 16
    load_requests: int = 200
    load_concurrency: int = 8
    timeout_s: float = 60.0
    seed: int = 0
    ttft_p99_s: float = 2.0
    itl_p99_s: float = 0.050
    e2e_p99_s: float = 30.0
    max_failure_rate: float = 0.005
    trace: Any = None  # worker.loadgen.traces.Trace: the performance phase replays it instead of a closed loop


def _ok(name: str, good: bool, measured: str, goal: str, why: str = "") -> Check:
    return Check(name, "pass" if good else "fail", measured, goal, why)


async def function_phase(opts: Options, result: Result) -> None:
    rng = random.Random(opts.seed)
    sem = asyncio.Semaphore(opts.concurrency)
    counts = {"sent": 0, "server": 0, "malformed": 0, "over_max": 0, "named": 0, "routed": 0}

    async def one(i: int, client: httpx.AsyncClient) -> None:
        model = opts.models[i % len(opts.models)] if opts.models else None
        max_tokens = 1 + rng.randrange(opts.max_tokens)
        prompt = f"[{opts.seed}:{i}] " + make_prompt(8 + rng.randrange(24), rng)
        rid = f"validate-{opts.seed}-{i}"
        async with sem:
            counts["sent"] += 1
            if i % 10 == 9:  # streamed: the SSE must parse to the end
                body = request_body(opts.endpoint, prompt, max_tokens, stream=True, temperature=0.0, ignore_eos=False,
                                    model=model)
                got = await send(client, opts.endpoint, body, start_s=0.0)
                if not got.ok:
                    counts["server" if got.cause in ("server_error", "timeout", "connect", "transport", "unavailable")
                           else "malformed"] += 1
                    result.failures.append(Failure(rid, f"{got.cause}: {got.detail[:160]}"))
                elif got.output_tokens > max_tokens:
                    counts["over_max"] += 1
                    result.failures.append(Failure(rid, f"{got.output_tokens} tokens for max_tokens {max_tokens}"))
                return
            body = request_body(opts.endpoint, prompt, max_tokens, stream=False, temperature=0.0, ignore_eos=False,
                                model=model)
            try:
                response = await client.post(PATHS[opts.endpoint], json=body, headers={"x-request-id": rid})
            except httpx.HTTPError as exc:
                counts["server"] += 1
                result.failures.append(Failure(rid, f"transport: {type(exc).__name__}: {exc}"[:200]))
                return
        if response.status_code != 200:
            counts["server" if response.status_code >= 500 else "malformed"] += 1
            result.failures.append(Failure(rid, f"HTTP {response.status_code}: {response.text[:120]}"))
            return
        try:
            data = response.json()
            usage = data.get("usage") or {}
            tokens = int(usage["completion_tokens"])
            if opts.endpoint == "generate":
                text = data["text"]
            elif opts.endpoint == "chat":
                text = data["choices"][0]["message"]["content"]
            else:
                text = data["choices"][0]["text"]
            if not isinstance(text, str):
                raise TypeError("the answer's text is not a string")
        except (ValueError, TypeError, AttributeError, KeyError, IndexError):
            counts["malformed"] += 1
            result.failures.append(Failure(rid, f"not the expected JSON: {response.text[:120]!r}"))
            return
        if tokens > max_tokens:
            counts["over_max"] += 1
            result.failures.append(Failure(rid, f"{tokens} tokens for max_tokens {max_tokens}"))
        answered = data.get("model")
        if model is not None and isinstance(answered, str):
            counts["named"] += 1
            if answered == model:
                counts["routed"] += 1
            else:
                result.failures.append(Failure(rid, f"asked for model {model!r}, answered by {answered!r}"))

    async with httpx.AsyncClient(base_url=opts.url, timeout=opts.timeout_s) as client:
        await asyncio.gather(*(one(i, client) for i in range(opts.requests)))
    n = counts["sent"]
    result.checks.append(_ok("function: no 5xx or transport failure", counts["server"] == 0,
                             f"{counts['server']} of {n}", "0"))
    result.checks.append(_ok("function: well-formed answers (JSON, SSE)", counts["malformed"] == 0,
                             f"{counts['malformed']} malformed of {n}", "0"))
    result.checks.append(_ok("function: tokens within max_tokens", counts["over_max"] == 0,
                             f"{counts['over_max']} over of {n}", "0"))
    if counts["named"] == 0:
        why = "give --model" if not opts.models else "the answers name no model (/v1/generate does not)"
        result.checks.append(Check("function: routing to the model asked for", "not measurable", "-", "≥ 99.9 %", why))
    else:
        share = counts["routed"] / counts["named"]
        result.checks.append(_ok("function: routing to the model asked for", share >= ROUTING_GOAL,
                                 f"{share:.2%} of {counts['named']}", "≥ 99.9 %"))


async def performance_phase(opts: Options, result: Result,
                            run: Callable[[LoadOptions], Any] = run_load) -> LoadReport:
    load = LoadOptions(url=opts.url, endpoint=opts.endpoint, concurrency=opts.load_concurrency,
                       requests=None if opts.trace is not None else opts.load_requests, trace=opts.trace,
                       model=opts.models[0] if opts.models else None,
                       timeout_s=opts.timeout_s, seed=opts.seed + 1, warmup=2, failure_backoff_s=0.2)
    report: LoadReport = await run(load)
    result.load = report.to_dict()
    for name, dist, goal in (("TTFT P99", report.ttft, opts.ttft_p99_s), ("ITL P99", report.itl, opts.itl_p99_s),
                             ("end-to-end P99", report.e2e, opts.e2e_p99_s)):
        if dist.count == 0 or math.isnan(dist.p99_ms):
            result.checks.append(Check(f"performance: {name}", "not measurable", "-", f"≤ {goal:g} s",
                                       "no successful request measured it"))
        else:
            result.checks.append(_ok(f"performance: {name}", dist.p99_ms <= goal * 1000, f"{dist.p99_ms / 1000:.3f} s",
                                     f"≤ {goal:g} s"))
    result.checks.append(_ok("performance: failure rate under load", report.failure_rate <= opts.max_failure_rate,
                             f"{report.failure_rate:.2%} of {report.sent}", f"≤ {opts.max_failure_rate:.1%}"))
    result.checks.append(Check("performance: throughput", "pass" if report.ok else "fail",
                               f"{report.output_tokens_per_s:,.1f} output tokens/s", "recorded as the baseline"))
    return report


def summary_json(result: Result) -> str:
    return json.dumps(result.to_json(), sort_keys=True, default=str)


def names(checks: Sequence[Check], verdict: Verdict) -> list[str]:
    return [c.name for c in checks if c.verdict == verdict]
