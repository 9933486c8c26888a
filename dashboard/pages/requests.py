"""Requests: throughput, queue length, TTFT / inter-token / end-to-end percentiles, failures by
cause, KV-cache use."""

from __future__ import annotations

from dash import Dash

from dashboard.figures.common import Figure
from dashboard.figures.series import lines_figure
from dashboard.model import Line
from dashboard.pages.common import INFERENCE_HINT, Page, hint
from dashboard.panel import Panel, PanelContext, graph_panel
from dashboard.queries import View
from store.series_index import Matcher

THROUGHPUT = Panel("req-throughput", "Finished requests per second by outcome")
TOKENS = Panel("req-tokens", "Tokens per second by model (prompt dashed)")
QUEUE = Panel("req-queue", "Queue length and running requests by model")
TTFT = Panel("req-ttft", "Time to first token (percentiles)")
ITL = Panel("req-itl", "Inter-token latency (percentiles)")
E2E = Panel("req-e2e", "End-to-end latency (percentiles)")
FAILURES = Panel("req-failures", "Failures by cause (per step)")
KV = Panel("req-kv", "KV-cache use by instance")
PANELS = (THROUGHPUT, TOKENS, QUEUE, TTFT, ITL, E2E, FAILURES, KV)
QUANTILES = (0.5, 0.9, 0.99)


def throughput(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    m = q.inference_matchers("inference_requests_total", view.filters)
    lines = q.range("inference_requests_total", m, view, fn="rate", by=("outcome",))
    return lines_figure(lines, empty_text=hint(view, INFERENCE_HINT), y_title="requests / s", kind="area")


def tokens(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    lines: list[Line] = []
    for metric, kind in (("inference_generation_tokens_total", "generated"), ("inference_prompt_tokens_total", "prompt")):
        m = q.inference_matchers(metric, view.filters)
        for line in q.range(metric, m, view, fn="rate", by=("model",)):
            lines.append(Line(f"{line.name} {kind}", line.ts_ms, line.values, line.name))
    return lines_figure(lines, empty_text=hint(view, INFERENCE_HINT), y_title="tokens / s",
                        dashed={line.name for line in lines if line.name.endswith(" prompt")})


def queue(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    lines: list[Line] = []
    for metric, kind in (("inference_requests_waiting", "waiting"), ("inference_requests_running", "running")):
        m = q.inference_matchers(metric, view.filters)
        for line in q.range(metric, m, view, by=("model",)):
            lines.append(Line(f"{line.name} {kind}", line.ts_ms, line.values, line.name))
    return lines_figure(lines, empty_text=hint(view, INFERENCE_HINT), y_title="requests",
                        dashed={line.name for line in lines if line.name.endswith(" running")})


def percentiles(ctx: PanelContext, view: View, metric: str, sla: float, what: str, missing: str) -> Figure:
    q = ctx.queries
    m = q.inference_matchers(f"{metric}_bucket", view.filters)
    lines = q.quantiles(metric, QUANTILES, m, view)
    scale, unit = (1000.0, "ms") if sla < 1 else (1.0, "s")
    return lines_figure(lines, empty_text=hint(view, missing), y_title=unit, scale=scale,
                        thresholds=[(sla, f"{what} SLA (P99) {sla * scale:g} {unit}")])


def failures(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    m = q.inference_matchers("inference_requests_total", view.filters)
    window = q.window_for("inference_requests_total", m, view, traces=3)
    failed = None if m is None else (*m, Matcher("outcome", "!=", "success"))
    lines = q.range("inference_requests_total", failed, view, fn="increase", by=("outcome",), window=window)
    http = q.inference_matchers("inference_http_server_errors_total", view.filters)
    for line in q.range("inference_http_server_errors_total", http, view, fn="increase", by=(), window=window):
        lines.append(Line("HTTP 5xx", line.ts_ms, line.values))
    if not lines and q.range("inference_requests_total", m, view, fn="increase", by=(), window=window):
        return lines_figure([], empty_text="no failed or aborted requests in this range")
    return lines_figure(lines, empty_text=hint(view, INFERENCE_HINT), y_title="requests per step", kind="bars")


def kv_cache(ctx: PanelContext, view: View) -> Figure:
    q = ctx.queries
    m = q.inference_matchers("inference_kv_cache_usage_ratio", view.filters)
    lines = q.range("inference_kv_cache_usage_ratio", m, view, by=("model", "instance"), combine="avg")
    return lines_figure(lines, empty_text=hint(view, INFERENCE_HINT + " (KV-cache use is exported by vLLM, SGLang and "
                                                   "TensorRT-LLM)"), y_title="KV cache used %", scale=100.0)


def register(app: Dash, ctx: PanelContext) -> None:
    t = ctx.sources.targets
    graph_panel(app, ctx, THROUGHPUT, lambda v: throughput(ctx, v))
    graph_panel(app, ctx, TOKENS, lambda v: tokens(ctx, v))
    graph_panel(app, ctx, QUEUE, lambda v: queue(ctx, v))
    graph_panel(app, ctx, TTFT, lambda v: percentiles(
        ctx, v, "inference_time_to_first_token_seconds", t.ttft_p99_seconds, "TTFT",
        INFERENCE_HINT + " (TGI exports no time-to-first-token histogram)"))
    graph_panel(app, ctx, ITL, lambda v: percentiles(
        ctx, v, "inference_inter_token_latency_seconds", t.inter_token_p99_seconds, "inter-token", INFERENCE_HINT))
    graph_panel(app, ctx, E2E, lambda v: percentiles(
        ctx, v, "inference_e2e_request_latency_seconds", t.e2e_p99_seconds, "end-to-end", INFERENCE_HINT))
    graph_panel(app, ctx, FAILURES, lambda v: failures(ctx, v))
    graph_panel(app, ctx, KV, lambda v: kv_cache(ctx, v))


PAGE = Page("dashboard.pages.requests", "/requests", "Requests", 2, PANELS, register)
