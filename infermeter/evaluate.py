"""``infermeter evaluate``: the same reference workload against several endpoints, side by side in
tokens/s per GPU, TTFT / ITL P99 and dollars per 1M tokens, and the cheapest that meets an SLA
(seed 004 §4: pick hardware and configuration by measured cost, not by datasheet).

Each endpoint is a candidate with what it runs on (``gpu``, ``gpus``, purchase ``class``); the
price book supplies $/GPU-hour, so $ per 1M output tokens = GPUs x $/GPU-hour / (output tokens/s x
3600) x 1e6 at the measured throughput. Candidates run one after the other with the same seed,
so each sees the same prompts; a candidate whose run fails keeps its row, with why.
"""

from __future__ import annotations

import asyncio
import csv
import io
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from cost.prices import PURCHASE_CLASSES, PriceBook
from worker.loadgen import LoadOptions, LoadReport, run_load

Runner = Callable[[LoadOptions], Awaitable[LoadReport]]


@dataclass(frozen=True)
class Candidate:
    name: str
    url: str
    gpu: str
    gpus: int = 1
    purchase_class: str = "on_demand"
    endpoint: str = "generate"
    model: str | None = None

    @classmethod
    def parse(cls, text: str) -> Candidate:
        """``name=h100,url=http://10.0.0.1:8000,gpu=H100,gpus=2,class=spot[,endpoint=completions][,model=M]``."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"--endpoint {text!r}: expected key=value pairs, got {part!r}")
            fields[key.strip()] = value.strip()
        unknown = set(fields) - {"name", "url", "gpu", "gpus", "class", "endpoint", "model"}
        if unknown:
            raise ValueError(f"--endpoint {text!r}: unknown keys {', '.join(sorted(unknown))}")
        for required in ("url", "gpu"):
            if not fields.get(required):
                raise ValueError(f"--endpoint {text!r}: {required}= is required")
        try:
            gpus = int(fields.get("gpus", "1"))
        except ValueError:
            raise ValueError(f"--endpoint {text!r}: gpus must be a whole number") from None
        if gpus < 1:
            raise ValueError(f"--endpoint {text!r}: gpus must be at least 1")
        klass = fields.get("class", "on_demand")
        if klass not in PURCHASE_CLASSES:
            raise ValueError(f"--endpoint {text!r}: class must be one of {', '.join(PURCHASE_CLASSES)}")
        endpoint = fields.get("endpoint", "generate")
        if endpoint not in ("generate", "completions"):
            raise ValueError(f"--endpoint {text!r}: endpoint must be generate or completions")
        return cls(fields.get("name") or fields["url"], fields["url"].rstrip("/"), fields["gpu"], gpus, klass, endpoint,
                   fields.get("model") or None)


@dataclass(frozen=True)
class Sla:
    ttft_p99_s: float | None = None
    itl_p99_s: float | None = None
    max_failure_rate: float = 0.01

    def misses(self, report: LoadReport) -> list[str]:
        out = []
        if report.ok == 0:
            return ["no successful request"]
        if self.ttft_p99_s is not None and not report.ttft.p99_ms <= self.ttft_p99_s * 1000:
            out.append(f"TTFT P99 {report.ttft.p99_ms / 1000:.3f} s > {self.ttft_p99_s:g} s")
        if self.itl_p99_s is not None and not report.itl.p99_ms <= self.itl_p99_s * 1000:
            out.append(f"ITL P99 {report.itl.p99_ms:.1f} ms > {self.itl_p99_s * 1000:g} ms")
        if report.failure_rate > self.max_failure_rate:
            out.append(f"failures {report.failure_rate:.1%} > {self.max_failure_rate:.1%}")
        return out


@dataclass
class Row:
    candidate: Candidate
    report: LoadReport | None
    dollars_per_hour: float
    error: str = ""
    misses: list[str] = field(default_factory=list)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.report.output_tokens_per_s / self.candidate.gpus if self.report else math.nan

    @property
    def dollars_per_million(self) -> float:
        if self.report is None or not self.report.output_tokens_per_s > 0 or self.dollars_per_hour <= 0:
            return math.nan
        return self.dollars_per_hour / (self.report.output_tokens_per_s * 3600) * 1e6


@dataclass
class Evaluation:
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False

    def ranked(self) -> list[Row]:
        """Cheapest per 1M tokens first; rows without a price or a result last, as they came."""
        return sorted(self.rows, key=lambda r: (math.isnan(r.dollars_per_million), r.dollars_per_million
                                                if not math.isnan(r.dollars_per_million) else 0.0))

    def best(self) -> Row | None:
        """The cheapest candidate that meets the SLA (None: none does)."""
        return next((r for r in self.ranked() if not r.error and not r.misses and not math.isnan(r.dollars_per_million)),
                    None)


async def evaluate(candidates: Sequence[Candidate], workload: LoadOptions, book: PriceBook, now_ms: int, sla: Sla,
                   run: Runner, into: Evaluation | None = None) -> Evaluation:
    """Rows are added to ``into`` as candidates finish, so an interrupted run keeps the finished ones."""
    out = into if into is not None else Evaluation([])
    rows, notes = out.rows, out.notes
    for c in candidates:
        rate = book.gpu_price(c.gpu, c.purchase_class, now_ms)
        if rate <= 0:
            notes.append(f"{c.name}: no price for GPU {c.gpu!r} ({c.purchase_class}) in the price book (cost.gpu_prices)")
        opts = replace(workload, url=c.url, endpoint=c.endpoint, model=c.model or workload.model)  # type: ignore[arg-type]
        try:
            report = await run(opts)
        except (OSError, RuntimeError, ValueError) as exc:
            rows.append(Row(c, None, rate * c.gpus, error=f"{type(exc).__name__}: {exc}"))
            continue
        row = Row(c, report, rate * c.gpus, misses=sla.misses(report))
        if report.ok == 0:
            row.error = "no successful request: " + ", ".join(f"{k} x{v}" for k, v in report.failures.items())
        rows.append(row)
    return out


HEADER = ["rank", "candidate", "gpu", "gpus", "class", "$/h", "out tok/s", "tok/s per GPU", "TTFT p99 s", "ITL p99 ms",
          "e2e p99 s", "failures", "$ per 1M tokens", "SLA"]


def rows_of(ev: Evaluation) -> list[list[str]]:
    best = ev.best()
    out = []
    for i, r in enumerate(ev.ranked(), start=1):
        rep = r.report
        sla = r.error or ("; ".join(r.misses) if r.misses else "met" + (" (cheapest)" if r is best else ""))
        out.append([str(i), r.candidate.name, r.candidate.gpu, str(r.candidate.gpus), r.candidate.purchase_class,
                    _f(r.dollars_per_hour, 2), _f(rep.output_tokens_per_s if rep else math.nan, 1),
                    _f(r.tokens_per_s_per_gpu, 1), _f(rep.ttft.p99_ms / 1000 if rep else math.nan, 3),
                    _f(rep.itl.p99_ms if rep else math.nan, 1), _f(rep.e2e.p99_ms / 1000 if rep else math.nan, 2),
                    f"{rep.failure_rate:.1%}" if rep else "-", _f(r.dollars_per_million, 4), sla])
    return out


def _f(value: float, digits: int) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.{digits}f}"


def render(ev: Evaluation, fmt: str) -> str:
    rows = rows_of(ev)
    best = ev.best()
    tail = [f"cheapest meeting the SLA: {best.candidate.name}" if best else "no candidate meets the SLA", *ev.notes]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([h.replace(" ", "_").replace("$", "dollars").replace("/", "_per_") for h in HEADER])
        writer.writerows(rows)
        return buf.getvalue()
    if fmt == "markdown":
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines + [""] + [f"- {t}" for t in tail]) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(HEADER)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines + tail) + "\n"


def evaluate_sync(candidates: Sequence[Candidate], workload: LoadOptions, book: PriceBook, now_ms: int, sla: Sla,
                  run: Runner = run_load) -> Evaluation:
    """Ctrl-C ends the run with the candidates finished so far (and a note saying so)."""
    out = Evaluation([])
    try:
        asyncio.run(evaluate(candidates, workload, book, now_ms, sla, run, out))
    except KeyboardInterrupt:
        out.notes.append(f"interrupted: {len(out.rows)} of {len(candidates)} candidates measured")
        out.interrupted = True
    return out


def summary_rows(ev: Evaluation) -> list[dict[str, object]]:
    """The ranked rows as plain values (stored, and what the finance report draws)."""
    best = ev.best()
    out: list[dict[str, object]] = []
    for r in ev.ranked():
        rep = r.report
        out.append({
            "candidate": r.candidate.name, "gpu": r.candidate.gpu, "gpus": r.candidate.gpus,
            "purchase_class": r.candidate.purchase_class, "dollars_per_hour": r.dollars_per_hour,
            "tokens_per_s_per_gpu": _num(r.tokens_per_s_per_gpu), "ttft_p99_s": _num(rep.ttft.p99_ms / 1000) if rep else None,
            "itl_p99_ms": _num(rep.itl.p99_ms) if rep else None, "dollars_per_million": _num(r.dollars_per_million),
            "sla": r.error or ("; ".join(r.misses) if r.misses else ("met (cheapest)" if r is best else "met")),
        })
    return out


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None
