"""The report as tables with stable, documented columns: the sheets of the XLSX file, and (in
long form, one value per row) the CSV file. Column names never change meaning; new columns are
only ever appended. ``reports/README.md`` lists every column (a test keeps the two in step).

Conventions: amounts are in the price book's currency (column names say ``dollars`` as the
metric names do; the ``unit`` column of the CSV and the ``columns`` sheet name the currency);
times are ISO 8601 UTC (``2026-11-01T00:00:00Z``); ratios are fractions (0.25 = 25 %); empty
means "not applicable / unknown", never zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from reports.model import FinanceReport, SpendLine, TokenLine

Cell = str | float | int | bool | None

CSV_COLUMNS = ("period", "section", "dimension", "key", "metric", "value", "unit", "detail")


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # key | text | number | time | bool
    unit: str  # "{currency}" is replaced by the report's currency
    doc: str


@dataclass(frozen=True)
class Sheet:
    name: str  # XLSX sheet name; CSV ``section`` + ``dimension``
    section: str
    dimension: str
    title: str
    columns: tuple[Column, ...]
    rows: list[tuple[Cell, ...]]


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _c(name: str, kind: str, unit: str, doc: str) -> Column:
    return Column(name, kind, unit, doc)


SUMMARY = (
    _c("item", "key", "", "what the row is (period_start, total_dollars, idle_dollars, ...)"),
    _c("value", "number", "", "the figure; for times and text see detail"),
    _c("unit", "text", "", "unit of value"),
    _c("detail", "text", "", "times (ISO 8601 UTC) and text items"),
)
CHECKS = (
    _c("check", "key", "", "what is reconciled, e.g. 'attributed + idle + overhead = total'"),
    _c("expected_dollars", "number", "{currency}", "the ledger's total for the period"),
    _c("actual_dollars", "number", "{currency}", "the sum of the lines being checked"),
    _c("difference_dollars", "number", "{currency}", "actual - expected"),
    _c("tolerance_dollars", "number", "{currency}", "largest difference accepted (half a cent)"),
    _c("ok", "bool", "", "1 when |difference| <= tolerance"),
)
SPEND = (
    _c("key", "key", "", "the model, node, GPU type, tenant, purchase class or component as stored ('' = none)"),
    _c("label", "text", "", "the key as shown to people, e.g. '(unattributed)' for an empty model"),
    _c("spend_dollars", "number", "{currency}", "cost in the period"),
    _c("share_ratio", "number", "ratio", "share of the period's total cost"),
    _c("gpu_hours", "number", "hours", "GPU time priced (busy and idle GPU-hours)"),
    _c("energy_kwh", "number", "kWh", "GPU energy priced, before PUE"),
)
TOKENS = (
    _c("key", "key", "", "the model, node or tenant ('' = none; the fleet row has '')"),
    _c("label", "text", "", "the key as shown to people"),
    _c("prompt_tokens", "number", "tokens", "prompt (prefill) tokens"),
    _c("generated_tokens", "number", "tokens", "generated (decode) tokens"),
    _c("requests", "number", "requests", "finished requests"),
    _c("spend_dollars", "number", "{currency}", "cost of the same key (tenants: busy cost only)"),
    _c("dollars_per_million_generated", "number", "{currency}/1M tokens", "spend / generated tokens x 1e6"),
    _c("dollars_per_million_total", "number", "{currency}/1M tokens", "spend / (prompt + generated tokens) x 1e6"),
    _c("note", "text", "", "caveats for this row"),
)
BUDGETS = (
    _c("scope", "key", "", "fleet or model"),
    _c("model", "key", "", "the model of a model budget ('' for the fleet)"),
    _c("budget_period", "text", "", "the budget's own period: day, week or month"),
    _c("spend_budget_dollars", "number", "{currency}", "spend budget for the report's period"),
    _c("prorated", "bool", "", "1 when the budget's period differs from the report's and was scaled by length"),
    _c("spent_dollars", "number", "{currency}", "actual spend in the period"),
    _c("spend_ratio", "number", "ratio", "spent / budget"),
    _c("projected_dollars", "number", "{currency}", "spent + forecast mean for the rest of the period (fleet only)"),
    _c("projected_ratio", "number", "ratio", "projected / budget"),
    _c("unit_budget_dollars_per_million", "number", "{currency}/1M tokens", "budget per 1M generated tokens"),
    _c("unit_actual_dollars_per_million", "number", "{currency}/1M tokens", "actual cost per 1M generated tokens"),
    _c("unit_ratio", "number", "ratio", "actual / budget per 1M tokens"),
    _c("status", "text", "", "within budget | on track to exceed | over budget | no budget figures"),
)
FORECAST = SUMMARY
ANOMALIES = (
    _c("fired_at", "key", "", "when the alert went to firing (ISO 8601 UTC)"),
    _c("alertname", "key", "", "CostPerTokenSpike or TokenCostOverBudget"),
    _c("resolved_at", "time", "", "when it resolved (empty: still firing or not on record)"),
    _c("severity", "text", "", "warning or critical"),
    _c("scope", "text", "", "fleet or model"),
    _c("model", "text", "", "the model, for a model-scoped alert"),
    _c("value_dollars_per_million", "number", "{currency}/1M tokens", "cost per 1M tokens when it fired"),
    _c("summary", "text", "", "the alert's summary"),
    _c("check_utilization", "text", "", "check 1: the utilization curve, last hour vs the 24 h before"),
    _c("check_request_mix", "text", "", "check 2: prompt and generation tokens per request, last hour vs before"),
    _c("check_autoscaling", "text", "", "check 3: whether the last scale recommendation was acted on"),
    _c("checks_note", "text", "", "why the checks are missing, when they are"),
)
PRICES = (
    _c("kind", "key", "", "gpu, electricity or overhead"),
    _c("item", "key", "", "GPU type / purchase class, electricity, overhead"),
    _c("effective_from", "key", "", "when the entry takes effect (ISO 8601 UTC)"),
    _c("rate_dollars", "number", "{currency}", "the price, per the unit column"),
    _c("rate_unit", "text", "", "per GPU-hour, per kWh or per node-hour"),
    _c("pue", "number", "ratio", "power usage effectiveness applied to energy (electricity only)"),
    _c("effective_to", "time", "", "when a later entry replaces it (empty: still in effect)"),
    _c("in_period", "bool", "", "1 when in effect during some part of the period"),
)
DAILY = (
    _c("day", "key", "", "UTC day (ISO date)"),
    _c("spend_dollars", "number", "{currency}", "cost of the day"),
    _c("cumulative_dollars", "number", "{currency}", "cost from the period start to the end of the day"),
)
CHANGES = (
    _c("at", "key", "", "when the change was made (ISO 8601 UTC)"),
    _c("action", "key", "", "price.set, budget.set, budget.delete, config.reload, silence.*, token.*"),
    _c("object", "text", "", "what changed, e.g. prices/gpu, budgets/model/llama-8b, alerts.thresholds"),
    _c("actor", "text", "", "the token name or signed-in user (system for SIGHUP)"),
    _c("role", "text", "", "viewer, operator or admin"),
    _c("address", "text", "", "the client address (cli, signal:SIGHUP for local changes)"),
)
SOFTWARE = (
    _c("node", "key", "", "the node (its node or host label, else the host of the engine's instance)"),
    _c("component", "key", "", "driver, cuda_driver, nvml, vbios, nccl, engine <name>, or an NCCL_* / TORCH_NCCL_* setting"),
    _c("value", "key", "", "the version or setting ('unset': a watched setting the node never showed)"),
    _c("first_seen", "time", "", "first seen in the period (ISO 8601 UTC, to the read's step)"),
    _c("last_seen", "time", "", "last seen in the period"),
    _c("odd", "bool", "", "differs from what most nodes of its cluster ran at the end of the period"),
    _c("replaced", "text", "", "the value it replaced on this node within the period (an upgrade or a changed setting)"),
    _c("cluster", "text", "", "the cluster label, when the series carry one"),
)
EVENTS = (
    _c("at", "key", "", "when the change happened (ISO 8601 UTC)"),
    _c("kind", "key", "", "deploy, config, software or other"),
    _c("model", "text", "", "the model it concerns (empty: every model)"),
    _c("version", "text", "", "the version deployed"),
    _c("node", "text", "", "the node it happened on (empty: all)"),
    _c("message", "text", "", "what was changed, as recorded"),
    _c("actor", "text", "", "who recorded it (token name, cli:<user>)"),
)
EVALUATIONS = (
    _c("at", "key", "", "when the `infermeter evaluate` run started (ISO 8601 UTC)"),
    _c("run", "key", "", "the run's id; its candidates are in rank order (cheapest per 1M tokens first)"),
    _c("candidate", "key", "", "the endpoint's name"),
    _c("gpu", "text", "", "the GPU type it runs on"),
    _c("gpus", "number", "", "how many"),
    _c("purchase_class", "text", "", "on_demand, spot or reserved (the price book's)"),
    _c("dollars_per_hour", "number", "{currency}/h", "GPUs x $/GPU-hour from the price book"),
    _c("tokens_per_s_per_gpu", "number", "tokens/s", "measured output tokens/s over the GPUs"),
    _c("ttft_p99_s", "number", "s", "measured time to first token, P99"),
    _c("itl_p99_ms", "number", "ms", "measured inter-token latency, P99"),
    _c("dollars_per_million", "number", "{currency}", "dollars per 1M output tokens at the measured throughput"),
    _c("sla", "text", "", "met, met (cheapest), or what it missed"),
)
ALL_COLUMNS: dict[str, tuple[Column, ...]] = {
    "summary": SUMMARY, "checks": CHECKS, "spend": SPEND, "tokens": TOKENS, "budgets": BUDGETS,
    "forecast": FORECAST, "anomalies": ANOMALIES, "prices": PRICES, "daily": DAILY, "changes": CHANGES,
    "software": SOFTWARE, "events": EVENTS, "evaluations": EVALUATIONS,
}


def _spend_rows(lines: Sequence[SpendLine]) -> list[tuple[Cell, ...]]:
    return [(s.key, s.label, s.dollars, s.share, s.gpu_hours, s.energy_kwh) for s in lines]


def _token_rows(lines: Sequence[TokenLine]) -> list[tuple[Cell, ...]]:
    return [(t.key, t.label, t.prompt_tokens, t.generated_tokens, t.requests, t.dollars,
             t.dollars_per_million_generated, t.dollars_per_million_total, t.note) for t in lines]


def _summary_rows(r: FinanceReport) -> list[tuple[Cell, ...]]:
    cur = r.currency
    t = r.totals
    return [
        ("period", None, "", r.period.label),
        ("period_start", None, "", iso(r.period.start_ms)),
        ("period_end", None, "", iso(r.period.end_ms)),
        ("data_until", None, "", iso(r.data_until_ms)),
        ("generated_at", None, "", iso(r.generated_at_ms)),
        ("currency", None, "", cur),
        ("total_dollars", t.total, cur, "gpu + energy + idle + overhead"),
        ("attributed_dollars", t.attributed, cur, "busy GPU time and its energy (gpu + energy)"),
        ("gpu_dollars", t.gpu, cur, "busy GPU-hours x price per GPU-hour"),
        ("energy_dollars", t.energy, cur, "busy GPUs' energy x price per kWh x PUE"),
        ("idle_dollars", t.idle, cur, f"GPU-minutes below {r.idle_utilization:.0%} utilization (rental + energy)"),
        ("overhead_dollars", t.overhead, cur, "fixed overhead per node-hour"),
        ("reconciled", 1 if r.reconciled else 0, "bool", "every check in 'checks' holds"),
    ]


def _forecast_rows(r: FinanceReport) -> list[tuple[Cell, ...]]:
    f = r.forecast
    cur = r.currency
    w = f.forecast
    run_total = f.spent + f.run_rate_rest if f.run_rate_rest is not None else None
    return [
        ("state", None, "", f.state),
        ("spent_dollars", f.spent, cur, "spend so far in the period"),
        ("remaining_from", None, "", iso(f.remaining_from_ms)),
        ("remaining_to", None, "", iso(f.remaining_to_ms)),
        ("forecast_mean_dollars", w.mean if w else None, cur, "projected spend of the rest" if w else "no forecast available"),
        ("forecast_low_dollars", w.low if w else None, cur, f"lower {w.level} % bound" if w else ""),
        ("forecast_high_dollars", w.high if w else None, cur, f"upper {w.level} % bound" if w else ""),
        ("forecast_until", None, "", iso(w.until_ms) if w else None),
        ("forecast_source", None, "", w.source if w else None),
        ("forecast_band_coverage", w.coverage if w else None, "share",
         f"out-of-sample coverage of the hourly {w.level} % band in the backtest" if w else ""),
        ("projected_total_dollars", f.projected_total, cur, "spent + forecast mean"),
        ("run_rate_dollars_per_hour", f.run_rate_per_hour, f"{cur}/hour", "mean spend per observed hour, trailing 7 days"),
        ("run_rate_rest_dollars", f.run_rate_rest, cur, "run rate x hours left"),
        ("run_rate_projected_total_dollars", run_total, cur, "spent + run rate x hours left"),
    ]


def sheets(r: FinanceReport) -> list[Sheet]:
    """Every table of the report, in reading order."""
    out = [
        Sheet("summary", "summary", "", "Summary", SUMMARY, _summary_rows(r)),
        Sheet("checks", "checks", "", "Reconciliation", CHECKS,
              [(c.name, c.expected, c.actual, c.difference, c.tolerance, c.ok) for c in r.checks]),
    ]
    for dim, title in (("component", "Spend by component"), ("model", "Spend by model"), ("node", "Spend by node"),
                       ("gpu_model", "Spend by GPU type"), ("tenant", "Spend by tenant"),
                       ("purchase_class", "Spend by purchase class")):
        out.append(Sheet(f"spend_{dim}", "spend", dim, title, SPEND, _spend_rows(r.spend[dim])))
    for dim, title in (("fleet", "Tokens and cost per 1M tokens, fleet"), ("model", "Tokens by model"),
                       ("node", "Tokens by node"), ("tenant", "Tokens by tenant")):
        out.append(Sheet(f"tokens_{dim}", "tokens", dim, title, TOKENS, _token_rows(r.tokens[dim])))
    out.append(Sheet("budgets", "budgets", "", "Budget vs actual", BUDGETS, [
        (b.scope, b.model, b.budget_period, b.spend_budget, b.prorated, b.spent, b.spend_ratio, b.projected,
         b.projected_ratio, b.unit_budget, b.unit_actual, b.unit_ratio, b.status) for b in r.budgets]))
    out.append(Sheet("forecast", "forecast", "", "Forecast for the rest of the period", FORECAST, _forecast_rows(r)))
    out.append(Sheet("anomalies", "anomalies", "", "Top cost anomalies", ANOMALIES, [
        (iso(a.fired_at_ms), a.alertname, iso(a.resolved_at_ms), a.severity, a.labels.get("scope", ""),
         a.labels.get("model", ""), a.value, a.summary, a.checks.get("check_utilization", ""),
         a.checks.get("check_request_mix", ""), a.checks.get("check_autoscaling", ""), a.checks_note)
        for a in r.anomalies]))
    out.append(Sheet("prices", "prices", "", "Prices in effect", PRICES, [
        (p.kind, p.item, iso(p.effective_from_ms), p.rate, p.unit, p.pue, iso(p.effective_to_ms), p.in_period)
        for p in r.prices]))
    out.append(Sheet("daily", "daily", "", "Spend per day", DAILY,
                     [((iso(d.day_ms) or "")[:10], d.dollars, d.cumulative) for d in r.days]))
    out.append(Sheet("changes", "changes", "", "Changes in the period (audit log)", CHANGES,
                     [(iso(c.at_ms), c.action, c.target, c.actor, c.role, c.address) for c in r.changes]))
    out.append(Sheet("software", "software", "", "Versions and NCCL settings per node", SOFTWARE,
                     [(v.node, v.component, v.value, iso(v.first_ms), iso(v.last_ms), v.odd, v.replaced, v.cluster)
                      for v in r.software]))
    out.append(Sheet("events", "events", "", "Deploys and config changes (markers)", EVENTS,
                     [(iso(e.at_ms), e.kind, e.model, e.version, e.node, e.message, e.actor) for e in r.events]))
    out.append(Sheet("evaluations", "evaluations", "", "Hardware evaluations (infermeter evaluate)", EVALUATIONS,
                     [(iso(v.at_ms), v.run, v.candidate, v.gpu, v.gpus, v.purchase_class, v.dollars_per_hour,
                       v.tokens_per_s_per_gpu, v.ttft_p99_s, v.itl_p99_ms, v.dollars_per_million, v.sla)
                      for v in r.evaluations]))
    return out


def unit_of(column: Column, currency: str) -> str:
    return column.unit.replace("{currency}", currency)


def long_rows(r: FinanceReport) -> list[tuple[Cell, ...]]:
    """One row per figure, :data:`CSV_COLUMNS` wide: (period, section, dimension, key, metric,
    value, unit, detail). Numbers go to ``value`` with their ``unit``; text and times go to
    ``detail``. Item/value sheets (summary, forecast) give one row per item, named by ``metric``."""
    out: list[tuple[Cell, ...]] = []
    for sheet in sheets(r):
        if sheet.columns is SUMMARY:
            for item, value, unit, detail in sheet.rows:
                out.append((r.period.label, sheet.section, sheet.dimension, "", item, value, unit, detail))
            continue
        keys = [i for i, c in enumerate(sheet.columns) if c.kind == "key"]
        for row in sheet.rows:
            key = " ".join(str(row[i]) if row[i] is not None else "" for i in keys)
            for col, value in zip(sheet.columns, row):
                base = (r.period.label, sheet.section, sheet.dimension, key, col.name)
                if col.kind == "number":
                    out.append((*base, value, unit_of(col, r.currency), None))
                elif col.kind == "bool":
                    out.append((*base, None if value is None else int(bool(value)), "bool", None))
                elif col.kind != "key" and value not in (None, ""):
                    out.append((*base, None, "", value))
    return out
