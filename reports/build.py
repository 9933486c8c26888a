"""Build a :class:`FinanceReport` from ledger queries: pure, given the sources and the period.

Definitions (README "Cost"): *attributed* cost is busy GPU time plus its energy (components
``gpu`` + ``energy``); *idle* is GPU-minutes below ``cost.idle_utilization`` (rental + energy);
*overhead* is per node-hour. Total = attributed + idle + overhead. Every breakdown (by model,
node, GPU type, tenant, purchase class, day) is checked against the ledger's own total to the
half-cent, and the checks travel with the report.

Cost per 1M tokens of a model or node = all its cost (idle and its share of overhead included,
as the ledger attributes them) / its generated tokens. Tenants get busy cost only (the ledger
splits idle and overhead among models, not tenants), which the report says next to them.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from cost.ledger import HOUR_MS, period_start_ms
from cost.prices import Budget, CostSettings
from reports.model import (
    COMPONENTS,
    SPEND_DIMENSIONS,
    TOKEN_DIMENSIONS,
    Anomaly,
    BudgetLine,
    Check,
    DayLine,
    FinanceReport,
    ForecastSummary,
    ForecastWindow,
    Period,
    PriceLine,
    ReportSources,
    SpendLine,
    TokenLine,
    Totals,
)

log = logging.getLogger(__name__)
DAY_MS = 86_400_000
TOLERANCE = 0.005  # half a cent: every reconciliation holds to the cent
RUN_RATE_WINDOW_MS = 7 * DAY_MS

EMPTY_LABELS = {
    "model": "(unattributed)",
    "node": "(unknown node)",
    "gpu_model": "(node overhead)",
    "tenant": "(no tenant)",
    "purchase_class": "(none)",
    "component": "(none)",
}
TENANT_NOTE = "busy cost only: idle and overhead are not split among tenants (they are under (no tenant))"


def label_for(dimension: str, key: str) -> str:
    return key if key else EMPTY_LABELS.get(dimension, "(none)")


def _f(value: Any) -> float:
    return float(value) if value is not None else 0.0


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _per_million(dollars: float, tokens: float) -> float | None:
    return dollars / tokens * 1e6 if tokens > 0 else None


def _spend_lines(rows: Iterable[dict[str, Any]], dimension: str, total: float) -> list[SpendLine]:
    lines = [
        SpendLine(
            dimension,
            str(r[dimension] or ""),
            label_for(dimension, str(r[dimension] or "")),
            _f(r["dollars"]),
            _f(r["gpu_seconds"]) / 3600.0,
            _f(r["energy_joules"]) / 3.6e6,
            _f(r["dollars"]) / total if total else 0.0,
        )
        for r in rows
    ]
    if dimension == "component":  # the cost model's order, not size, reads best
        order = {c: i for i, c in enumerate(COMPONENTS)}
        return sorted(lines, key=lambda line: order.get(line.key, len(order)))
    return sorted(lines, key=lambda line: (-line.dollars, line.key))


def _token_lines(
    dimension: str, tokens: list[dict[str, Any]], spend: dict[str, float]
) -> list[TokenLine]:
    out = []
    seen = set()
    for r in tokens:
        key = str(r.get(dimension) or "") if dimension != "fleet" else ""
        seen.add(key)
        prompt, gen, req = _f(r["prompt_tokens"]), _f(r["generated_tokens"]), _f(r["requests"])
        dollars = spend.get(key, 0.0)
        note = TENANT_NOTE if dimension == "tenant" and key else ""
        label = "fleet" if dimension == "fleet" else label_for(dimension, key)
        out.append(TokenLine(dimension, key, label, prompt, gen, req, dollars,
                             _per_million(dollars, gen), _per_million(dollars, gen + prompt), note))
    for key, dollars in spend.items():  # cost with no tokens at all still shows (no unit cost)
        if key not in seen and dimension != "fleet":
            out.append(TokenLine(dimension, key, label_for(dimension, key), 0.0, 0.0, 0.0, dollars, None, None))
    return sorted(out, key=lambda line: (-line.dollars, line.key))


def _exact(period: Period, budget_period: str) -> bool:
    start, end = period.start_ms, period.end_ms
    return (
        period_start_ms(start, budget_period) == start
        and period_start_ms(end, budget_period) == end
        and period_start_ms(end - 1, budget_period) == start
    )


def _budget_period_ms(period: Period, budget_period: str) -> int:
    if budget_period == "day":
        return DAY_MS
    if budget_period == "week":
        return 7 * DAY_MS
    start = period_start_ms(period.start_ms, "month")
    nxt = period_start_ms(start + 32 * DAY_MS, "month")
    return nxt - start


def _budget_line(
    budget: Budget, period: Period, spend_by_model: dict[str, float], tokens_by_model: dict[str, float],
    total: float, forecast: ForecastWindow | None,
) -> BudgetLine:
    fleet = budget.scope == "fleet"
    spent = total if fleet else spend_by_model.get(budget.model, 0.0)
    generated = sum(tokens_by_model.values()) if fleet else tokens_by_model.get(budget.model, 0.0)
    exact = _exact(period, budget.period)
    amount = None
    if budget.spend_per_period is not None:
        scale = 1.0 if exact else (period.end_ms - period.start_ms) / _budget_period_ms(period, budget.period)
        amount = budget.spend_per_period * scale
    # Only the fleet has a spend forecast; a model budget shows no projection rather than a guess.
    projected = spent + forecast.mean if fleet and forecast is not None else None
    unit_actual = _per_million(spent, generated)
    return BudgetLine(
        scope=budget.scope, model=budget.model if not fleet else "", budget_period=budget.period,
        spend_budget=amount, prorated=not exact and amount is not None, spent=spent,
        spend_ratio=_ratio(spent, amount), projected=projected, projected_ratio=_ratio(projected, amount),
        unit_budget=budget.cost_per_million_tokens, unit_actual=unit_actual,
        unit_ratio=_ratio(unit_actual, budget.cost_per_million_tokens),
    )


def price_lines(settings: CostSettings, period: Period) -> list[PriceLine]:
    """Every price-book entry, with the date a later entry of the same item replaces it."""
    items: dict[tuple[str, str], list[tuple[int, float, str, float | None]]] = defaultdict(list)
    for g in settings.gpu_prices:
        name = f"{'any GPU' if g.gpu_model == '*' else g.gpu_model} / {g.purchase_class}"
        items[("gpu", name)].append((g.from_ms, g.dollars_per_gpu_hour, "per GPU-hour", None))
    for e in settings.electricity:
        items[("electricity", "electricity")].append((e.from_ms, e.dollars_per_kwh, "per kWh", e.pue))
    for o in settings.overhead:
        items[("overhead", "overhead")].append((o.from_ms, o.dollars_per_node_hour, "per node-hour", None))
    out = []
    for (kind, item), entries in items.items():
        entries.sort(key=lambda e: e[0])
        for i, (from_ms, rate, unit, pue) in enumerate(entries):
            to_ms = entries[i + 1][0] if i + 1 < len(entries) else None
            in_period = from_ms < period.end_ms and (to_ms is None or to_ms > period.start_ms)
            out.append(PriceLine(kind, item, rate, unit, pue, from_ms, to_ms, in_period))
    return out


def _days(hourly: dict[int, float], period: Period, until_ms: int) -> list[DayLine]:
    per_day: dict[int, float] = defaultdict(float)
    for hour, dollars in hourly.items():
        per_day[hour - (hour - period.start_ms) % DAY_MS] += dollars
    last = max([until_ms - 1, *per_day])
    out, cumulative, day = [], 0.0, period.start_ms
    while day < period.end_ms and day <= last:
        cumulative += per_day.get(day, 0.0)
        out.append(DayLine(day, per_day.get(day, 0.0), cumulative))
        day += DAY_MS
    return out


def _run_rate(src: ReportSources, now_ms: int) -> float | None:
    """Mean spend per observed hour over the trailing 7 days of complete hours."""
    end = now_ms - now_ms % HOUR_MS
    spend = src.ledger.hourly_series(end - RUN_RATE_WINDOW_MS, end)["spend"]
    return sum(spend.values()) / len(spend) if spend else None


def _forecast(src: ReportSources, period: Period, spent: float, notes: list[str]) -> ForecastSummary:
    now = src.now_ms
    if now < period.start_ms:
        return ForecastSummary("future", spent, period.start_ms, period.end_ms, None, None, None)
    if now >= period.end_ms:
        return ForecastSummary("closed", spent, period.end_ms, period.end_ms, None, None, None)
    window: ForecastWindow | None = None
    if src.forecast is not None:
        try:
            window = src.forecast(now, period.end_ms)
        except Exception as exc:  # a failing forecaster degrades this section only
            log.warning("spend forecast failed", exc_info=True)
            notes.append(f"spend forecast failed: {type(exc).__name__}: {exc}")
    rate = _run_rate(src, now)
    rest = rate * (period.end_ms - now) / HOUR_MS if rate is not None else None
    return ForecastSummary("open", spent, now, period.end_ms, window, rate, rest)


def _anomalies(src: ReportSources, period: Period, limit: int, notes: list[str]) -> tuple[list[Anomaly], str]:
    if src.anomalies is None:
        return [], "no alert history was available to this report"
    if limit <= 0:
        return [], "anomalies not listed (top = 0)"
    try:
        found = src.anomalies(period.start_ms, period.end_ms, limit)
    except Exception as exc:  # the rest of the report stands without this section
        log.warning("reading cost anomalies failed", exc_info=True)
        notes.append(f"cost anomalies could not be read: {type(exc).__name__}: {exc}")
        return [], "the alert history could not be read"
    return found, "" if found else "no cost alert (CostPerTokenSpike, TokenCostOverBudget) fired in this period"


L = TypeVar("L")


def _side_list(read: Callable[[int, int], list[L]] | None, start_ms: int, end_ms: int, what: str,
               notes: list[str]) -> list[L]:
    """One of the report's side lists (audit changes, markers, versions): a report without it
    beats no report, so a failure becomes a note."""
    if read is None:
        return []
    try:
        return read(start_ms, end_ms)
    except Exception as exc:
        log.warning("reading %s failed", what, exc_info=True)
        notes.append(f"{what} could not be read: {type(exc).__name__}: {exc}")
        return []


def build_report(src: ReportSources, period: Period, top_anomalies: int = 10) -> FinanceReport:
    """The report of ``period`` as of ``src.now_ms``.

    While a period is open the ledger rewrites the hour in progress every minute (and the hour
    just closed in the first minutes of the next), each rewrite one transaction; the report's
    queries are separate reads, so one that straddles a rewrite does not add up. Such a report
    is read once more; a second mismatch is reported as it is.
    """
    report = _build(src, period, top_anomalies)
    if not report.reconciled and report.forecast.state == "open":
        log.info("report of %s did not reconcile while the ledger is live; reading it again", period.label)
        report = _build(src, period, top_anomalies)
    return report


def _build(src: ReportSources, period: Period, top_anomalies: int) -> FinanceReport:
    ledger, start, end = src.ledger, period.start_ms, period.end_ms
    notes: list[str] = []
    total = sum(_f(r["dollars"]) for r in ledger.spend(start, end))
    spend: dict[str, list[SpendLine]] = {
        dim: _spend_lines(ledger.spend(start, end, [dim]), dim, total) for dim in ("component", *SPEND_DIMENSIONS)
    }
    comp = {line.key: line.dollars for line in spend["component"]}
    unknown = sorted(set(comp) - set(COMPONENTS))
    if unknown:
        notes.append(f"ledger rows with unknown components {unknown} are in the total only")
    totals = Totals(comp.get("gpu", 0.0), comp.get("energy", 0.0), comp.get("idle", 0.0), comp.get("overhead", 0.0), total)

    by_key = {dim: {line.key: line.dollars for line in spend[dim]} for dim in ("model", "node", "tenant")}
    tokens = {dim: _token_lines(dim, ledger.tokens(start, end, [dim]), by_key[dim]) for dim in TOKEN_DIMENSIONS}
    fleet_rows = ledger.tokens(start, end) or [{"prompt_tokens": 0, "generated_tokens": 0, "requests": 0}]
    tokens["fleet"] = _token_lines("fleet", fleet_rows, {"": total})

    data_until = min(max(src.now_ms, start), end)
    days = _days(ledger.hourly_series(start, end)["spend"], period, data_until)
    checks = [Check("attributed + idle + overhead = total", total, totals.components_sum, TOLERANCE)]
    for dim in SPEND_DIMENSIONS:
        checks.append(Check(f"sum of spend by {dim} = total", total, sum(line.dollars for line in spend[dim]), TOLERANCE))
    checks.append(Check("sum of daily spend = total", total, sum(d.dollars for d in days), TOLERANCE))

    forecast = _forecast(src, period, total, notes)
    tokens_by_model = {line.key: line.generated_tokens for line in tokens["model"]}
    budgets = [_budget_line(b, period, by_key["model"], tokens_by_model, total, forecast.forecast)
               for b in src.settings.budgets]
    anomalies, anomalies_note = _anomalies(src, period, top_anomalies, notes)
    if forecast.state == "open":
        until = datetime.fromtimestamp(data_until / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
        notes.append(f"the period is in progress: figures cover it up to {until}")
    elif forecast.state == "future":
        notes.append("the period has not started: there is nothing to report yet")
    return FinanceReport(
        period=period, currency=src.settings.currency, generated_at_ms=src.now_ms, data_until_ms=data_until,
        totals=totals, spend=spend, tokens=tokens, checks=checks, budgets=budgets, forecast=forecast,
        anomalies=anomalies, anomalies_note=anomalies_note, prices=price_lines(src.settings, period), days=days,
        idle_utilization=src.settings.idle_utilization, notes=notes,
        changes=_side_list(src.changes, period.start_ms, period.end_ms, "the audit log", notes),
        software=_side_list(src.software, period.start_ms, min(period.end_ms, src.now_ms), "the version series", notes),
        events=_side_list(src.events, period.start_ms, period.end_ms, "the deploy markers", notes),
        evaluations=_side_list(src.evaluations, period.start_ms, period.end_ms, "the hardware evaluations", notes),
    )
