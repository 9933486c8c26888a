"""The load report: throughput, TTFT / ITL / end-to-end percentiles, failures by cause.

Throughput counts successful requests only, over the wall time from the first send to the last
answer.  ITL percentiles are over every inter-token gap of every successful request (as vLLM's
benchmark does); TPOT is per request.  Latencies are reported in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from worker.loadgen.client import RequestResult


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN for no values."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class Dist:
    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Dist:
        values = sorted(seconds)
        if not values:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        ms = [v * 1000 for v in values]
        return cls(len(ms), sum(ms) / len(ms), percentile(ms, 0.5), percentile(ms, 0.9), percentile(ms, 0.99))


@dataclass
class LoadReport:
    target: str
    mode: str
    elapsed_s: float
    sent: int
    ok: int
    failed: int
    failures: dict[str, int]
    req_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    prompt_tokens: int
    output_tokens: int
    ttft: Dist
    itl: Dist
    tpot: Dist
    e2e: Dist
    notes: list[str] = field(default_factory=list)
    failure_examples: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, results: Sequence[RequestResult], elapsed_s: float, target: str, mode: str,
              notes: Sequence[str] = ()) -> LoadReport:
        good = [r for r in results if r.ok]
        failures: dict[str, int] = {}
        examples: dict[str, str] = {}
        for r in results:
            if not r.ok:
                cause = r.cause or "unknown"
                failures[cause] = failures.get(cause, 0) + 1
                examples.setdefault(cause, r.detail[:200])
        prompt = sum(r.prompt_tokens for r in good)
        output = sum(r.output_tokens for r in good)
        span = elapsed_s if elapsed_s > 0 else math.nan
        return cls(
            target=target, mode=mode, elapsed_s=elapsed_s, sent=len(results), ok=len(good),
            failed=len(results) - len(good), failures=dict(sorted(failures.items())),
            req_per_s=len(good) / span, output_tokens_per_s=output / span, total_tokens_per_s=(prompt + output) / span,
            prompt_tokens=prompt, output_tokens=output,
            ttft=Dist.of([r.ttft_s for r in good if r.ttft_s is not None]),
            itl=Dist.of([gap for r in good for gap in r.itl_s]),
            tpot=Dist.of([sum(r.itl_s) / len(r.itl_s) for r in good if r.itl_s]),
            e2e=Dist.of([r.e2e_s for r in good]),
            notes=list(notes), failure_examples=examples,
        )

    @property
    def failure_rate(self) -> float:
        return self.failed / self.sent if self.sent else 0.0

    def to_dict(self) -> dict[str, Any]:
        def clean(value: Any) -> Any:
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list):
                return [clean(v) for v in value]
            return value

        return {k: clean(v) for k, v in asdict(self).items()}

    def table(self) -> str:
        def f(v: float, digits: int = 1) -> str:
            return "-" if not math.isfinite(v) else f"{v:,.{digits}f}"

        lines = [
            f"target            {self.target} ({self.mode})",
            f"duration          {self.elapsed_s:.2f} s",
            f"requests          {self.sent} sent, {self.ok} ok, {self.failed} failed ({self.failure_rate:.2%})",
            f"throughput        {f(self.req_per_s, 2)} req/s, {f(self.output_tokens_per_s)} output tokens/s, "
            f"{f(self.total_tokens_per_s)} total tokens/s",
            f"tokens            {self.prompt_tokens:,} prompt, {self.output_tokens:,} output",
            "",
            f"{'latency (ms)':<18}{'count':>8}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}",
        ]
        for name, d in (("TTFT", self.ttft), ("ITL", self.itl), ("TPOT", self.tpot), ("end-to-end", self.e2e)):
            lines.append(f"{name:<18}{d.count:>8}{f(d.mean_ms, 2):>10}{f(d.p50_ms, 2):>10}{f(d.p90_ms, 2):>10}"
                         f"{f(d.p99_ms, 2):>10}")
        if self.failures:
            lines.append("")
            lines.append("failures by cause")
            for cause, n in self.failures.items():
                example = self.failure_examples.get(cause, "")
                lines.append(f"  {cause:<16}{n:>8}  {example[:80]}")
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)
