"""The report as a PDF for people (reportlab): the totals and their reconciliation first, then
budget and forecast, the breakdowns with charts, cost per 1M tokens, the cost anomalies with
their checks, and the prices in effect. Amounts are shown to the cent; the CSV/XLSX keep full
precision. Text stays within the standard PDF fonts' Latin-1 range."""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from reportlab.graphics.shapes import Drawing
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import KeepTogether, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle
from reportlab.platypus.flowables import Flowable

from reports import pdf_charts
from reports.model import FinanceReport, SpendLine, TokenLine

STYLES = getSampleStyleSheet()
BODY = ParagraphStyle("body", parent=STYLES["BodyText"], fontSize=8.5, leading=11)
SMALL = ParagraphStyle("small", parent=BODY, fontSize=7.5, leading=9.5, textColor=colors.HexColor("#444444"))
H1, H2 = STYLES["Title"], ParagraphStyle("h2", parent=STYLES["Heading2"], fontSize=12, spaceBefore=10, spaceAfter=4)
GRID = TableStyle([
    ("FONT", (0, 0), (-1, 0), "Helvetica-Bold", 8),
    ("FONT", (0, 1), (-1, -1), "Helvetica", 8),
    ("LINEBELOW", (0, 0), (-1, 0), 0.6, colors.black),
    ("LINEBELOW", (0, 1), (-1, -1), 0.2, colors.HexColor("#cccccc")),
    ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
    ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ("TOPPADDING", (0, 0), (-1, -1), 2),
    ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
])


def money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def when(ms: int | None) -> str:
    return "-" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _p(text: str, style: ParagraphStyle = BODY) -> Paragraph:
    return Paragraph(escape(text), style)


def _table(header: Sequence[str], rows: Sequence[Sequence[str | Flowable]], widths: Sequence[float] | None = None,
           bold_last: bool = False) -> Table:
    table = Table([list(header), *[list(r) for r in rows]], colWidths=widths, repeatRows=1, hAlign="LEFT")
    table.setStyle(GRID)
    if bold_last:
        table.setStyle(TableStyle([("FONT", (0, -1), (-1, -1), "Helvetica-Bold", 8),
                                   ("LINEABOVE", (0, -1), (-1, -1), 0.6, colors.black)]))
    return table


def _section(title: str, body: Sequence[Flowable]) -> list[Flowable]:
    """A heading kept on the page of what follows it."""
    head: list[Flowable] = [Paragraph(escape(title), H2)]
    first = list(body[:1])
    if first and isinstance(first[0], KeepTogether):  # nested KeepTogether pushes the whole block on
        first = list(first[0]._content)
    return [KeepTogether(head + first), *body[1:]]


def _pair(left: Drawing | None, right: Drawing | None) -> Flowable | None:
    cells = [d for d in (left, right) if d is not None]
    if not cells:
        return None
    table = Table([cells], hAlign="LEFT")
    table.setStyle(TableStyle([("VALIGN", (0, 0), (-1, -1), "TOP")]))
    return table


def _totals(r: FinanceReport) -> list[Flowable]:
    t, cur = r.totals, r.currency

    def share(value: float) -> str:
        return pct(value / t.total) if t.total else "-"

    rows = [
        ["GPU time, busy", money(t.gpu), share(t.gpu)],
        ["Energy, busy GPUs", money(t.energy), share(t.energy)],
        ["Attributed (GPU + energy)", money(t.attributed), share(t.attributed)],
        [f"Idle (GPU-minutes below {r.idle_utilization:.0%} utilization)", money(t.idle), share(t.idle)],
        ["Overhead (per node-hour)", money(t.overhead), share(t.overhead)],
        ["Total", money(t.total), share(t.total)],
    ]
    first = r.checks[0]
    verdict = "reconciles" if r.reconciled else "DOES NOT RECONCILE"
    line = (f"Attributed {money(t.attributed)} + idle {money(t.idle)} + overhead {money(t.overhead)} = "
            f"{money(t.components_sum)} {cur}; ledger total {money(t.total)} {cur}: {verdict} "
            f"(difference {money(first.difference)}; {sum(c.ok for c in r.checks)} of {len(r.checks)} checks hold, "
            "see Reconciliation).")
    return [_table(["Cost", f"Amount ({cur})", "Share"], rows, [95 * mm, 35 * mm, 20 * mm], bold_last=True),
            Spacer(1, 3), _p(line)]


def _spend_table(lines: Sequence[SpendLine], name: str, cur: str, limit: int = 25) -> list[Flowable]:
    if not lines:
        return [_p(f"No spend by {name} recorded in this period.", SMALL)]
    rows = [[s.label, money(s.dollars), pct(s.share), f"{s.gpu_hours:,.1f}", f"{s.energy_kwh:,.1f}"] for s in lines[:limit]]
    rows.append(["Total", money(sum(s.dollars for s in lines)), pct(sum(s.share for s in lines)),
                 f"{sum(s.gpu_hours for s in lines):,.1f}", f"{sum(s.energy_kwh for s in lines):,.1f}"])
    out: list[Flowable] = [_table([name.capitalize(), f"Spend ({cur})", "Share", "GPU-hours", "Energy (kWh)"], rows,
                                  [60 * mm, 30 * mm, 20 * mm, 25 * mm, 25 * mm], bold_last=True)]
    if len(lines) > limit:
        out.append(_p(f"{len(lines) - limit} more lines in the CSV/XLSX; the total row covers all of them.", SMALL))
    return out


def _token_table(lines: Sequence[TokenLine], name: str, cur: str) -> Table:
    rows = [[t.label, count(t.prompt_tokens), count(t.generated_tokens), count(t.requests), money(t.dollars),
             money(t.dollars_per_million_generated), money(t.dollars_per_million_total)] for t in lines]
    return _table([name.capitalize(), "Prompt tok.", "Generated tok.", "Requests", f"Spend ({cur})",
                   "per 1M gen.", "per 1M total"], rows,
                  [40 * mm, 23 * mm, 25 * mm, 20 * mm, 24 * mm, 20 * mm, 20 * mm])


def _budgets(r: FinanceReport) -> list[Flowable]:
    if not r.budgets:
        return [_p("No budgets are configured (cost.budgets in the config).", SMALL)]
    rows = []
    for b in r.budgets:
        scope = "fleet" if b.scope == "fleet" else f"model {b.model}"
        budget = money(b.spend_budget) + (" *" if b.prorated else "")
        rows.append([scope, budget, money(b.spent), pct(b.spend_ratio), money(b.projected), pct(b.projected_ratio),
                     money(b.unit_budget), money(b.unit_actual), b.status])
    out: list[Flowable] = [_table(["Scope", "Budget", "Spent", "Used", "Projected", "Proj./budget", "Budget/1M",
                                   "Actual/1M", "Status"], rows,
                                  [28 * mm, 20 * mm, 20 * mm, 14 * mm, 20 * mm, 18 * mm, 18 * mm, 18 * mm, 26 * mm])]
    if any(b.prorated for b in r.budgets):
        out.append(_p("* the budget's own period differs from the report's: scaled by length.", SMALL))
    return out


def _forecast(r: FinanceReport) -> list[Flowable]:
    f, cur = r.forecast, r.currency
    if f.state == "closed":
        return [_p(f"The period is closed: final spend {money(f.spent)} {cur}.")]
    if f.state == "future":
        return [_p("The period has not started.")]
    rows: list[list[str | Flowable]] = [["Spent so far", money(f.spent), _p(f"until {when(f.remaining_from_ms)}", SMALL)]]
    w = f.forecast
    if w is None:
        rows.append(["Forecast, rest of period", "no forecast available", ""])
    else:
        band = f"{money(w.low)} - {money(w.high)} ({w.level} %)" if w.low is not None and w.high is not None else "no band"
        if w.coverage is not None:
            band += f", the hourly {w.level} % band held {w.coverage:.0%} of actuals in the backtest"
        cover = "to the period end" if f.forecast_covers_rest else f"until {when(w.until_ms)} only (forecast horizon)"
        rows.append(["Forecast, rest of period", money(w.mean), _p(f"{w.source}; band {band}; {cover}", SMALL)])
        rows.append(["Projected period total (forecast)", money(f.projected_total), ""])
    if f.run_rate_rest is not None and f.run_rate_per_hour is not None:
        rows.append(["Run rate, rest of period", money(f.run_rate_rest),
                     _p(f"{money(f.run_rate_per_hour)} {cur}/h (mean of observed hours, trailing 7 days); "
                        f"period total {money(f.spent + f.run_rate_rest)}", SMALL)])
    table = _table(["", f"Amount ({cur})", "Detail"], rows, [50 * mm, 35 * mm, 95 * mm])
    table.setStyle(TableStyle([("ALIGN", (2, 0), (2, -1), "LEFT")]))
    return [table]


def _anomalies(r: FinanceReport) -> list[Flowable]:
    if not r.anomalies:
        return [_p(r.anomalies_note or "None.", SMALL)]
    out: list[Flowable] = []
    for i, a in enumerate(r.anomalies, start=1):
        value = f"{money(a.value)} {r.currency} per 1M tokens" if a.value is not None else "value not recorded"
        head = (f"<b>{i}. {escape(a.alertname)}</b> ({escape(a.severity or 'no severity')}, {escape(a.scope)}): {value}; "
                f"fired {when(a.fired_at_ms)}, " + (f"resolved {when(a.resolved_at_ms)}" if a.resolved_at_ms else "not resolved"))
        block: list[Flowable] = [Paragraph(head, BODY)]
        if a.summary:
            block.append(_p(a.summary, SMALL))
        for key, text in a.checks.items():
            block.append(_p(f"- {key.removeprefix('check_').replace('_', ' ')}: {text}", SMALL))
        if a.checks_note:
            block.append(_p(a.checks_note, SMALL))
        out.append(KeepTogether([*block, Spacer(1, 4)]))
    return out


def _prices(r: FinanceReport) -> Table:
    rows = [[p.item, f"{p.rate:,.4f} {r.currency} {p.unit}" + (f", PUE {p.pue:g}" if p.pue is not None else ""),
             when(p.effective_from_ms), when(p.effective_to_ms) if p.effective_to_ms else "still in effect",
             "yes" if p.in_period else "no"] for p in r.prices]
    return _table(["Item", "Price", "From", "To", "In period"], rows, [45 * mm, 50 * mm, 32 * mm, 32 * mm, 16 * mm])


def _evaluations(r: FinanceReport) -> list[Flowable]:
    """The newest `infermeter evaluate` run of the period: its chart and its ranked rows."""
    if not r.evaluations:
        return [_p("No hardware evaluation was run in the period (infermeter evaluate).", SMALL)]
    newest = max(v.run for v in r.evaluations)
    body: list[Flowable] = []
    chart = pdf_charts.evaluation_bars(r.evaluations, r.currency)
    if chart is not None:
        body.append(chart)
    rows = [[v.candidate, f"{v.gpus}x {v.gpu} ({v.purchase_class})", money(v.dollars_per_hour),
             "-" if v.tokens_per_s_per_gpu is None else f"{v.tokens_per_s_per_gpu:,.1f}",
             "-" if v.dollars_per_million is None else money(v.dollars_per_million), v.sla[:40]]
            for v in r.evaluations if v.run == newest]
    body.append(_table(["Candidate", "Runs on", f"{r.currency}/h", "tok/s per GPU", f"{r.currency} per 1M", "SLA"], rows,
                       [30 * mm, 40 * mm, 20 * mm, 25 * mm, 25 * mm, 40 * mm]))
    return body


def _software(r: FinanceReport) -> list[Flowable]:
    """The odd values and the changes of the period (the full list is in the CSV / XLSX)."""
    if not r.software:
        return [_p("No version series in the period (NVML, NCCL logs or engine endpoints).", SMALL)]
    shown = [v for v in r.software if v.odd or v.replaced]
    if not shown:
        nodes = len({v.node for v in r.software})
        return [_p(f"All {nodes} nodes ran the same versions and settings; nothing changed in the period.", SMALL)]
    rows = [[v.node, v.component, v.value, "differs from most nodes" if v.odd else "",
             f"replaced {v.replaced} on {when(v.first_ms)}" if v.replaced else ""] for v in shown]
    return [_table(["Node", "Component", "Value", "Drift", "Change"], rows, [28 * mm, 40 * mm, 35 * mm, 35 * mm, 42 * mm])]


def render_pdf(r: FinanceReport) -> bytes:
    cur = r.currency
    story: list[Flowable] = [
        Paragraph(escape(f"infermeter cost report: {r.period.label}"), H1),
        _p(f"Period {when(r.period.start_ms)} to {when(r.period.end_ms)}; data until {when(r.data_until_ms)}; "
           f"generated {when(r.generated_at_ms)}; amounts in {cur}."),
    ]
    story += [_p(f"Note: {n}", SMALL) for n in r.notes]
    story += _section("Totals", _totals(r))
    chart = pdf_charts.cumulative_spend(r)
    if chart is not None:
        story += [Spacer(1, 6), chart]
    story += _section("Budget vs actual", _budgets(r))
    story += _section("Forecast for the rest of the period", _forecast(r))
    for title, dim, name, charts in (
        ("Spend by model", "model", "model",
         (pdf_charts.components_pie(r), pdf_charts.top_bars(r.spend["model"], "Spend by model", cur))),
        ("Spend by GPU type", "gpu_model", "GPU type",
         (pdf_charts.top_bars(r.spend["gpu_model"], "Spend by GPU type", cur),
          pdf_charts.top_bars(r.spend["node"], "Spend by node", cur))),
        ("Spend by node", "node", "node", (None, None)),
        ("Spend by tenant", "tenant", "tenant", (None, None)),
        ("Spend by purchase class", "purchase_class", "purchase class", (None, None)),
    ):
        pair = _pair(*charts)
        body = ([pair] if pair else []) + _spend_table(r.spend[dim], name, cur)
        if dim == "tenant":
            body.append(_p("Tenants carry busy cost only; idle and overhead are not split among tenants.", SMALL))
        story += _section(title, body)
    tokens: list[Flowable] = [
        _token_table(r.tokens["fleet"] + r.tokens["model"], "model", cur), Spacer(1, 4),
        _p("Cost per 1M tokens of a model = all of its cost (idle and its share of overhead included) / its tokens.", SMALL)]
    if r.tokens["tenant"]:
        tokens += [Spacer(1, 4), _token_table(r.tokens["tenant"], "tenant", cur)]
    story += _section("Tokens and cost per 1M tokens", tokens)
    story += _section("Top cost anomalies", _anomalies(r))
    story += _section("Prices in effect", [_prices(r)])
    story += _section("Changes in the period (audit log)", [_table(
        ["When", "Change", "Object", "By"],
        [[when(c.at_ms), c.action, c.target, f"{c.actor} ({c.role}) from {c.address}"] for c in r.changes],
        [32 * mm, 28 * mm, 55 * mm, 60 * mm])] if r.changes else [_p("No prices, budgets, rules, silences or tokens "
                                                                   "changed in the period.", SMALL)])
    story += _section("Deploys and config changes", [_table(
        ["When", "Change", "By"],
        [[when(e.at_ms), " ".join(x for x in (e.kind, e.model or "all models", e.version) if x)
          + (f" on {e.node}" if e.node else "") + (f": {e.message}" if e.message else ""), e.actor] for e in r.events],
        [32 * mm, 115 * mm, 33 * mm])] if r.events else [_p("No deploy or config change was recorded in the period "
                                                            "(infermeter mark, POST /api/v1/events).", SMALL)])
    story += _section("Hardware evaluations", _evaluations(r))
    story += _section("Versions and NCCL settings per node", _software(r))
    story += _section("Reconciliation", [_table(
        ["Check", "Expected", "Actual", "Difference", "Result"],
        [[c.name, money(c.expected), money(c.actual), money(c.difference), "OK" if c.ok else "FAILED"] for c in r.checks],
        [75 * mm, 25 * mm, 25 * mm, 22 * mm, 16 * mm])])
    if r.days:
        story += _section("Spend per day", [_table(
            ["Day", f"Spend ({cur})", f"Cumulative ({cur})"],
            [[when(d.day_ms)[:10], money(d.dollars), money(d.cumulative)] for d in r.days], [30 * mm, 30 * mm, 35 * mm])])
    buf = io.BytesIO()
    doc = SimpleDocTemplate(buf, pagesize=A4, leftMargin=15 * mm, rightMargin=15 * mm, topMargin=15 * mm,
                            bottomMargin=15 * mm, title=f"infermeter cost report {r.period.label}", author="infermeter",
                            invariant=1)
    doc.build(story)
    return buf.getvalue()
