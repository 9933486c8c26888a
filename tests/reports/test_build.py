"""The report model built from a priced store: totals reconcile, breakdowns match hand-computed
costs, budgets, forecast and anomalies."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest

from cost.ledger import HOUR_MS
from reports.build import build_report
from reports.forecast import rest_of_period
from reports.model import ForecastWindow, ReportSources
from reports.period import PeriodError, current_month, parse_period
from tests.conftest import T0
from tests.reports.conftest import CHECKS, JAN1, NOW, Seeded, cost_settings

JAN = parse_period("2027-01")
# Two priced hours (see conftest): hour 1 n1/0 $5 (half at $4, half at $6) + $0.045 energy,
# n1/1 idle $5 + $0.009, n2/0 spot $1.5 + $0.045, overhead $2; hour 2 the same at $6 on n1/0.
PRICED = {"gpu": 5 + 6 + 1.5 * 2, "energy": 0.045 * 4, "idle": 5.009 + 6.009, "overhead": 4.0}
EARLIER = {"gpu": 14 * 10.0, "idle": 14 * 2.0}


def test_period_parsing() -> None:
    assert (JAN.start_ms, JAN.end_ms) == (JAN1, JAN1 + 31 * 86_400_000)
    assert parse_period("2027-01-15").end_ms - parse_period("2027-01-15").start_ms == 86_400_000
    assert parse_period("2027-01-01..2027-01-07").hours == 7 * 24
    assert parse_period("2026-12").end_ms == JAN1
    assert current_month(T0) == JAN
    for bad in ("2027-13", "2027-1", "Jan", "2027-01-10..2027-01-01", "2027-02-30"):
        with pytest.raises(PeriodError):
            parse_period(bad)


def test_totals_reconcile_and_match_the_hand_computed_costs(seeded: Seeded) -> None:
    r = build_report(seeded.sources(), JAN)
    t = r.totals
    assert t.gpu == pytest.approx(PRICED["gpu"] + EARLIER["gpu"], rel=1e-3)
    assert t.energy == pytest.approx(PRICED["energy"], rel=1e-2)
    assert t.idle == pytest.approx(PRICED["idle"] + EARLIER["idle"], rel=1e-3)
    assert t.overhead == pytest.approx(PRICED["overhead"], rel=1e-6)
    assert t.attributed + t.idle + t.overhead == pytest.approx(t.total, abs=1e-9)
    assert r.reconciled and len(r.checks) == 7
    assert all(c.ok for c in r.checks), [c for c in r.checks if not c.ok]
    for dim in ("model", "node", "gpu_model", "tenant", "purchase_class"):
        assert sum(s.dollars for s in r.spend[dim]) == pytest.approx(t.total, abs=0.005)
        assert sum(s.share for s in r.spend[dim]) == pytest.approx(1.0)
    by_class = {s.key: s.dollars for s in r.spend["purchase_class"]}
    assert by_class["spot"] == pytest.approx(2 * 1.545 + 2 * 1.0, rel=1e-3)  # overhead rows carry the node's class
    node_overhead = {s.key: s.dollars for s in r.spend["gpu_model"]}[""]
    assert node_overhead == pytest.approx(PRICED["overhead"])
    assert [d.cumulative for d in r.days][-1] == pytest.approx(t.total)
    assert len(r.days) == 15  # Jan 1..15, the period in progress


def test_breakdowns_labels_and_cost_per_million(seeded: Seeded) -> None:
    r = build_report(seeded.sources(), JAN)
    model = {s.key: s for s in r.spend["model"]}
    assert set(model) == {"llama", "qwen"}
    assert r.spend["model"][0].key == "llama"  # largest first
    tenants = {s.label: s.dollars for s in r.spend["tenant"]}
    assert set(tenants) == {"acme", "globex", "(no tenant)"}
    assert tenants["acme"] / tenants["globex"] == pytest.approx(60 / 40, rel=1e-3)  # busy cost by token share
    tokens = {t.key: t for t in r.tokens["model"]}
    llama_gen = 100.0 * 2 * 3600 + 14 * 100_000
    assert tokens["llama"].generated_tokens == pytest.approx(llama_gen, rel=1e-6)
    assert tokens["llama"].dollars_per_million_generated == pytest.approx(model["llama"].dollars / llama_gen * 1e6)
    fleet = r.tokens["fleet"][0]
    assert fleet.dollars == pytest.approx(r.totals.total)
    assert fleet.generated_tokens == pytest.approx(llama_gen + 50.0 * 2 * 3600, rel=1e-6)
    assert all("busy cost only" in t.note for t in r.tokens["tenant"] if t.key)


def test_budgets_prorated_and_projected(seeded: Seeded) -> None:
    window = ForecastWindow(NOW, JAN.end_ms, mean=500.0, low=400.0, high=650.0, source="ets")
    r = build_report(seeded.sources(forecast=lambda lo, hi: window), JAN)
    fleet, llama = r.budgets
    assert fleet.spend_budget == 1000.0 and not fleet.prorated
    assert fleet.spent == pytest.approx(r.totals.total)
    assert fleet.projected == pytest.approx(r.totals.total + 500.0)
    assert fleet.unit_actual == pytest.approx(r.tokens["fleet"][0].dollars_per_million_generated)
    assert fleet.unit_ratio == pytest.approx(fleet.unit_actual / 20.0)  # type: ignore[operator]
    assert fleet.status == ("over budget" if fleet.unit_actual > 20 else "within budget")  # type: ignore[operator]
    assert llama.prorated and llama.spend_budget == pytest.approx(100.0 * 31 / 7)
    assert llama.projected is None  # no per-model forecast: no guess
    assert r.forecast.state == "open" and r.forecast.projected_total == pytest.approx(r.totals.total + 500)
    assert r.forecast.forecast_covers_rest


def test_forecast_absent_failing_and_run_rate(seeded: Seeded) -> None:
    r = build_report(seeded.sources(), JAN)
    assert r.forecast.forecast is None and r.forecast.projected_total is None
    # Run rate: mean spend per observed hour, trailing 7 days (Jan 8..14 one hour each + 2 priced hours).
    rate = r.forecast.run_rate_per_hour
    assert rate == pytest.approx((7 * 12.0 + 13.599 + 15.599) / 9, rel=1e-3)
    assert rate is not None and r.forecast.run_rate_rest == pytest.approx(rate * (JAN.end_ms - NOW) / HOUR_MS)

    def broken(lo: int, hi: int) -> ForecastWindow | None:
        raise RuntimeError("model store offline")

    r = build_report(seeded.sources(forecast=broken), JAN)
    assert r.forecast.forecast is None and any("model store offline" in n for n in r.notes)
    closed = build_report(seeded.sources(now_ms=JAN.end_ms + HOUR_MS), JAN)
    assert closed.forecast.state == "closed" and closed.forecast.run_rate_rest is None
    assert closed.totals.total == pytest.approx(r.totals.total)


def test_anomalies_from_the_alert_history(seeded: Seeded) -> None:
    r = build_report(seeded.sources(), JAN, top_anomalies=10)
    names = [(a.alertname, a.labels.get("model", "")) for a in r.anomalies]
    # critical first, then by value; December's and the GPU alert are left out
    assert names == [("TokenCostOverBudget", ""), ("CostPerTokenSpike", "llama"), ("CostPerTokenSpike", "qwen")]
    over, spike, old = r.anomalies
    assert over.resolved_at_ms is None and dict(over.checks) == CHECKS and over.value == 55.0
    assert spike.resolved_at_ms == T0 + 80 * 60_000 and spike.summary.startswith("model llama")
    assert not old.checks and "no longer on record" in old.checks_note
    assert [a.alertname for a in build_report(seeded.sources(), JAN, top_anomalies=1).anomalies] == ["TokenCostOverBudget"]
    empty = build_report(seeded.sources(), parse_period("2027-01-02"))
    assert empty.anomalies == [] and "no cost alert" in empty.anomalies_note


def test_prices_in_effect_with_dates(seeded: Seeded) -> None:
    r = build_report(seeded.sources(), JAN)
    h100 = [p for p in r.prices if p.item == "H100 / on_demand"]
    assert [(p.rate, p.effective_to_ms) for p in h100] == [(4.0, T0 + 30 * 60_000), (6.0, None)]
    assert all(p.in_period for p in h100)
    assert [p.in_period for p in r.prices if p.item == "any GPU / on_demand"] == [False]
    assert {p.kind for p in r.prices} == {"gpu", "electricity", "overhead"}


class _Broken:
    """A ledger whose breakdown by model misses a row: the report must say it does not reconcile."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def spend(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.inner.spend(start_ms, end_ms, by)
        return rows[1:] if list(by) == ["model"] else rows

    def tokens(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]:
        return self.inner.tokens(start_ms, end_ms, by)  # type: ignore[no-any-return]

    def hourly_series(self, start_ms: int, end_ms: int, model: str | None = None) -> dict[str, dict[int, float]]:
        return self.inner.hourly_series(start_ms, end_ms, model)  # type: ignore[no-any-return]


def test_a_breakdown_that_does_not_add_up_is_flagged(seeded: Seeded) -> None:
    r = build_report(ReportSources(_Broken(seeded.ledger), cost_settings(), NOW), JAN)
    assert not r.reconciled
    assert [c.name for c in r.checks if not c.ok] == ["sum of spend by model = total"]


def test_a_rewrite_between_reads_is_read_again(seeded: Seeded) -> None:
    """The first read of the breakdown by model straddles a rewrite of the hour in progress."""

    class Racing(_Broken):
        reads = 0

        def spend(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]:
            if list(by) == ["model"]:
                Racing.reads += 1
                if Racing.reads == 1:
                    return super().spend(start_ms, end_ms, by)
            rows: list[dict[str, Any]] = self.inner.spend(start_ms, end_ms, by)
            return rows

    r = build_report(ReportSources(Racing(seeded.ledger), cost_settings(), NOW), JAN)
    assert r.reconciled and Racing.reads == 2
    closed = build_report(ReportSources(_Broken(seeded.ledger), cost_settings(), JAN.end_ms), JAN)
    assert not closed.reconciled  # a closed period is read once: a mismatch there is real


def test_empty_period() -> None:
    class Empty:
        def spend(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]:
            return [] if list(by) else [{"dollars": None, "gpu_seconds": None, "energy_joules": None}]

        def tokens(self, start_ms: int, end_ms: int, by: Iterable[str] = ()) -> list[dict[str, Any]]:
            return [] if list(by) else [{"prompt_tokens": None, "generated_tokens": None, "requests": None}]

        def hourly_series(self, start_ms: int, end_ms: int, model: str | None = None) -> dict[str, dict[int, float]]:
            return {"spend": {}, "tokens": {}}

    r = build_report(ReportSources(Empty(), cost_settings(), JAN1 - 86_400_000), JAN)
    assert r.totals.total == 0 and r.reconciled and r.forecast.state == "future"
    assert r.tokens["fleet"][0].dollars_per_million_generated is None
    assert r.anomalies == [] and "no alert history" in r.anomalies_note


@pytest.mark.parametrize(
    ("start", "frm", "to", "mean", "until"),
    [
        (0, 0, 3 * HOUR_MS, 1 + 2 + 3, 3 * HOUR_MS),  # whole hours
        (0, HOUR_MS // 2, 2 * HOUR_MS, 0.5 * 1 + 2, 2 * HOUR_MS),  # the hour in progress counts for its part
        (0, 0, 10 * HOUR_MS, 1 + 2 + 3 + 4, 4 * HOUR_MS),  # cut where the forecast ends
    ],
)
def test_rest_of_period_sums_the_hourly_path(start: int, frm: int, to: int, mean: float, until: int) -> None:
    class Path:
        start_ms, step_ms, model = start, HOUR_MS, "ets"
        mean = np.array([1.0, 2.0, 3.0, 4.0])
        lo80 = mean * 0.5
        hi80 = mean * 2
        backtest_coverage80 = 0.78

    w = rest_of_period(Path(), frm, to)
    assert w is not None and w.mean == pytest.approx(mean) and w.until_ms == until
    assert w.low == pytest.approx(mean * 0.5) and w.high == pytest.approx(mean * 2) and w.source == "ets"
    assert w.coverage == 0.78  # the band's achieved coverage rides with it into the report


def test_rest_of_period_edge_cases() -> None:
    class Path:
        start_ms, step_ms, model = 0, HOUR_MS, "ets"
        backtest_coverage80 = None
        mean = np.array([1.0, np.nan, 3.0])
        lo80 = np.array([np.nan, 0.0, 0.0])
        hi80 = np.array([2.0, 0.0, 0.0])

    w = rest_of_period(Path(), 0, 3 * HOUR_MS)
    assert w is not None and w.mean == 1.0 and w.until_ms == HOUR_MS and w.low is None  # NaN ends it; no band
    assert rest_of_period(None, 0, HOUR_MS) is None
    assert rest_of_period(Path(), 5 * HOUR_MS, 6 * HOUR_MS) is None  # beyond the horizon


def test_a_side_list_that_cannot_be_read_becomes_a_note(seeded: Seeded) -> None:
    import dataclasses

    def broken(_lo: int, _hi: int) -> list[object]:
        raise OSError("table is locked")

    sources = dataclasses.replace(seeded.sources(), changes=broken, software=broken, events=broken, evaluations=broken)
    r = build_report(sources, JAN)  # the report still stands
    assert r.changes == [] and r.software == [] and r.events == [] and r.evaluations == []
    assert [n for n in r.notes if "could not be read" in n] == [
        "the audit log could not be read: OSError: table is locked",
        "the version series could not be read: OSError: table is locked",
        "the deploy markers could not be read: OSError: table is locked",
        "the hardware evaluations could not be read: OSError: table is locked",
    ]
    assert r.totals.total > 0
