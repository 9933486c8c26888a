"""Step planning, settings, filters, the token gate's pieces, and the reads over a real store
(SQLite file) seeded with a small synthetic fleet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from access.authn import bearer
from access.principal import Principal, Role
from cost.prices import CostSettings
from dashboard import cost_reads
from dashboard.auth import decode_principal, encode_principal
from dashboard.figures.series import forecast_figure
from dashboard.queries import Filters, SeriesQueries, View, one_of, selector_text
from dashboard.settings import MAX_POINTS_PER_TRACE, DashboardSettings
from dashboard.sources import Sources, Targets
from dashboard.window import DAY_MS, HOUR_MS, MINUTE_MS, NICE_STEPS_MS, RANGES_MS, parse_range, plan
from infermeter import db
from store import ManualClock, Reader, StoreOptions, TimeSeriesStore, create_store_engine
from store.selector_text import parse_selector
from store.types import SampleBatch
from tests.dashboard.fakes import FakeForecasts, flat_forecast
from tests.dashboard.synthetic import FleetShape, SyntheticFleet

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z


# -- step planning --------------------------------------------------------------------------------
@pytest.mark.parametrize("range_ms", RANGES_MS)
@pytest.mark.parametrize("traces", [1, 8, 64, 500])
def test_every_range_stays_under_the_point_ceiling_on_nice_aligned_steps(range_ms: int, traces: int) -> None:
    now = T0 + 12_345
    w = plan(now, range_ms, traces=traces, max_points=MAX_POINTS_PER_TRACE)
    assert w.points <= MAX_POINTS_PER_TRACE
    assert w.start_ms <= now - range_ms and w.start_ms % w.step_ms == 0 and w.end_ms == now
    assert w.step_ms in NICE_STEPS_MS or w.step_ms % DAY_MS == 0
    assert w.points * traces <= max(24_000, 2 * traces)  # the figure's point budget


def test_many_series_over_long_ranges_step_by_hours_so_the_hour_rollups_answer() -> None:
    assert plan(T0, 7 * DAY_MS, traces=1, series=64 * 14).step_ms == HOUR_MS
    assert plan(T0, 7 * DAY_MS, traces=1, series=4).step_ms == 15 * MINUTE_MS  # 672 points of at most 1000
    assert plan(T0, 15 * MINUTE_MS).step_ms == 15_000  # never below the scrape interval
    assert plan(T0, HOUR_MS, min_step_ms=MINUTE_MS).step_ms == MINUTE_MS


def test_range_picker_values_are_clamped() -> None:
    assert parse_range(None, HOUR_MS) == HOUR_MS
    assert parse_range("86400000", HOUR_MS) == DAY_MS
    assert parse_range(1, HOUR_MS) == 15 * MINUTE_MS
    assert parse_range(10**12, HOUR_MS) == 30 * DAY_MS
    assert parse_range(True, HOUR_MS) == HOUR_MS


def test_settings_parse_durations_and_refuse_nonsense() -> None:
    s = DashboardSettings.model_validate({"refresh_interval": "30s", "default_range": "1d", "max_points_per_trace": 500})
    assert (s.refresh_interval, s.default_range) == (30_000, DAY_MS)
    assert DashboardSettings().refresh_interval == 15_000
    assert DashboardSettings(refresh_interval=0).refresh_interval == 0
    for bad in ({"default_range": "45d"}, {"refresh_interval": "100ms"}, {"max_points_per_trace": 5000},
                {"colour": "blue"}, {"refresh_interval": "soon"}):
        with pytest.raises(ValidationError):
            DashboardSettings.model_validate(bad)


def test_filters_and_matcher_text() -> None:
    assert Filters.of(None, "n1") == Filters((), ("n1",))
    assert Filters.of(["b", "a", "a", ""], []) == Filters(("a", "b"), ())
    assert Filters.of("x", None).describe() == "model x"
    m = one_of("model", ["llama-3.1 (8b)", "qwen"])
    assert m.matches("llama-3.1 (8b)") and not m.matches("llama-3x1 (8b)") and not m.matches("qwen2")
    matcher = one_of("job", ['a"b.c\\d'])
    text = selector_text("up", [matcher], 'x="1"')
    parsed = parse_selector(text)  # the same escapes as the rule language's strings
    assert parsed.matchers[0] == matcher and parsed.matchers[0].matches('a"b.c\\d') and not parsed.matchers[0].matches('a"bxc\\d')


def test_token_pieces() -> None:
    assert bearer("Bearer  abc ") == "abc" and bearer("Basic abc") is None and bearer("Bearer") is None
    alice = Principal("alice@example.com; x", Role.OPERATOR, "oidc")
    assert decode_principal(encode_principal(alice).decode()) == alice
    assert decode_principal("forged") is None and decode_principal(None) is None


def test_targets_come_from_the_alert_thresholds() -> None:
    class Thresholds:
        throughput_below_mean_ratio = 0.2
        failure_rate = 0.01

    t = Targets.of(Thresholds())
    assert (t.throughput_below_mean_ratio, t.failure_rate, t.utilization_target) == (0.2, 0.01, 0.70)


# -- cost arithmetic ------------------------------------------------------------------------------
def cost(**budgets: object) -> CostSettings:
    return CostSettings.model_validate({"budgets": [
        {"scope": "fleet", "spend_per_period": 1000.0, "period": "month"},
        {"scope": "model", "model": "m1", "spend_per_period": 100.0, "period": "day", "cost_per_million_tokens": 5.0},
    ], **budgets})


def test_budget_selection_follows_the_model_filter() -> None:
    c = cost()
    assert cost_reads.spend_budget(c, Filters()).scope == "fleet"  # type: ignore[union-attr]
    assert cost_reads.spend_budget(c, Filters(("m1",))).model == "m1"  # type: ignore[union-attr]
    assert cost_reads.spend_budget(c, Filters(("m1", "m2"))).scope == "fleet"  # type: ignore[union-attr]
    assert cost_reads.spend_budget(c, Filters(), "day") is None
    assert cost_reads.unit_budget(c, Filters(("m1",))).cost_per_million_tokens == 5.0  # type: ignore[union-attr]
    assert cost_reads.unit_budget(c, Filters()) is None


def test_period_end_rolls_over_months_and_years() -> None:
    from datetime import UTC, datetime

    def ms(*args: int) -> int:
        return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)

    assert cost_reads.period_end_ms(ms(2026, 12, 1), "month") == ms(2027, 1, 1)
    assert cost_reads.period_end_ms(ms(2027, 1, 31), "day") == ms(2027, 2, 1)
    assert cost_reads.period_end_ms(ms(2027, 2, 1), "month") == ms(2027, 3, 1)


def test_cumulative_path_and_crossing_agree_with_the_forecast_budget_arithmetic() -> None:
    now = T0 + 30 * MINUTE_MS  # half of the first forecast hour is left
    points = flat_forecast(T0, level=10.0, spread=4.0, hours=10)
    path = cost_reads.cumulative_path(points, spent=50.0, now_ms=now, until_ms=T0 + 4 * HOUR_MS)
    assert path is not None
    assert path.ts_ms.tolist() == [now, T0 + HOUR_MS, T0 + 2 * HOUR_MS, T0 + 3 * HOUR_MS, T0 + 4 * HOUR_MS]
    assert path.mean.tolist() == pytest.approx([50.0, 55.0, 65.0, 75.0, 85.0])
    budget = cost_reads.BudgetLine(70.0, "fleet", T0, T0 + DAY_MS)
    crossing = cost_reads.crossing(points, budget, 50.0, now)
    assert crossing.at_ms == T0 + 2 * HOUR_MS + 30 * MINUTE_MS  # 5 + 10 + 5 of 10 $/h
    assert crossing.upper_at_ms is not None and crossing.upper_at_ms < crossing.at_ms
    band = cost_reads.forecast_band(points, now, horizon_ms=3 * HOUR_MS)
    assert band is not None and band.ts_ms.tolist() == [T0, T0 + HOUR_MS, T0 + 2 * HOUR_MS, T0 + 3 * HOUR_MS]
    assert band.coverage == {80: 0.81, 95: 0.94}  # what the bands achieved, for the tooltip
    traces = forecast_figure([], band, empty_text="", no_forecast_text="")["data"]
    assert [t["name"] for t in traces[:4:2]] == ["95 % interval (held 94% in backtest)", "80 % interval (held 81% in backtest)"]
    assert "80 % band held 81% of actuals in backtest" in traces[-1]["hovertemplate"]


def test_price_rows_tell_what_is_in_effect() -> None:
    c = CostSettings.model_validate({"gpu_prices": [
        {"gpu_model": "H100", "dollars_per_gpu_hour": 3.0, "effective_from": "2026-01-01T00:00:00Z"},
        {"gpu_model": "H100", "dollars_per_gpu_hour": 2.5, "effective_from": "2026-06-01T00:00:00Z"},
        {"gpu_model": "H100", "dollars_per_gpu_hour": 2.0, "effective_from": "2030-01-01T00:00:00Z"},
    ]})
    rows = cost_reads.price_rows(c, T0)
    assert [r[-1] for r in rows["gpu"]] == ["superseded", "in effect", "scheduled"]
    assert rows["electricity"][0][-1] == "in effect"


def test_forecast_lookup_names_the_scope_and_says_why_when_missing() -> None:
    fakes = FakeForecasts({"spend:fleet": flat_forecast(T0, 1.0, 0.1)})
    src = Sources(clock=ManualClock(T0), reader=None, cost=cost(), forecasts=fakes)  # type: ignore[arg-type]
    found, why = cost_reads.latest_forecast(src, "spend", Filters())
    assert found is not None and why == ""
    missing, why = cost_reads.latest_forecast(src, "spend", Filters(("m1",)))
    assert missing is None and "spend:model=m1" in why and fakes.asked == ["spend:fleet", "spend:model=m1"]
    _, why = cost_reads.latest_forecast(src, "spend", Filters(("a", "b")))
    assert "select one model" in why
    none = Sources(clock=ManualClock(T0), reader=None, cost=cost())  # type: ignore[arg-type]
    assert "no forecast yet" in cost_reads.latest_forecast(none, "spend", Filters())[1]


# -- reads over a real store ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SeriesQueries, SyntheticFleet]]:
    path: Path = tmp_path_factory.mktemp("reads") / "store.db"
    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    fleet = SyntheticFleet(FleetShape(nodes=2, gpus_per_node=4, per_gpu_tokens=True), T0 - 3 * HOUR_MS, T0)
    clock = ManualClock(fleet.start_ms)
    store = TimeSeriesStore(engine, clock, StoreOptions())
    store.open()
    ids = store.resolve(fleet.keys)
    for batch in fleet.batches():
        clock.set(int(batch.ts_ms[-1]))
        store.append(SampleBatch(batch.keys, batch.key_index, batch.ts_ms, batch.values, ids))
    yield SeriesQueries(Reader(store), lambda instance: instance.rsplit(":", 1)[0]), fleet
    store.close()
    engine.dispose()


def test_filter_options_list_models_and_nodes(fleet_store: tuple[SeriesQueries, SyntheticFleet]) -> None:
    q, _ = fleet_store
    assert q.models() == ["llama-3-70b", "qwen2-7b"]
    assert q.nodes() == ["gpu-node-00", "gpu-node-01"]


def test_model_filter_selects_the_gpus_of_the_nodes_serving_it(fleet_store: tuple[SeriesQueries, SyntheticFleet]) -> None:
    q, _ = fleet_store
    view = View(T0, 3 * HOUR_MS, Filters(("qwen2-7b",)))
    lines = q.range("gpu_utilization_ratio", q.gpu_matchers(view.filters), view, name=lambda lab: lab["host"] + "/" + lab["gpu"])
    assert {line.name.split("/")[0] for line in lines} == {"gpu-node-01"} and len(lines) == 4
    nothing = Filters(("qwen2-7b",), ("gpu-node-00",))
    assert q.gpu_matchers(nothing) is None and q.inference_matchers("inference_requests_total", nothing) is None
    by_node = q.inference_matchers("inference_requests_total", Filters((), ("gpu-node-00",)))
    assert by_node is not None and len(q.keys("inference_requests_total", by_node)) == 3


def test_stepped_reads_respect_the_window(fleet_store: tuple[SeriesQueries, SyntheticFleet]) -> None:
    q, _ = fleet_store
    view = View(T0, 3 * HOUR_MS, Filters(), max_points=100)
    lines = q.range("gpu_power_watts", (), view)
    assert len(lines) == 8 and all(len(line.ts_ms) <= 100 for line in lines)
    assert lines[0].ts_ms[1] - lines[0].ts_ms[0] == 2 * MINUTE_MS  # 3 h / 98 points, rounded up to a nice step
    rate = q.range("inference_generation_tokens_total", (), view, fn="rate", by=("model",))
    assert [line.name for line in rate] == ["llama-3-70b", "qwen2-7b"]
    assert rate[0].ts_ms[-1] + 2 * MINUTE_MS <= T0  # the bucket in progress is left out
    assert np.nanmean(rate[0].values) > 100


def test_histogram_percentiles_are_ordered(fleet_store: tuple[SeriesQueries, SyntheticFleet]) -> None:
    q, _ = fleet_store
    view = View(T0, 3 * HOUR_MS, Filters(), max_points=60)
    lines = q.quantiles("inference_inter_token_latency_seconds", (0.5, 0.9, 0.99), (), view)
    assert [line.name for line in lines] == ["p50", "p90", "p99"]
    p50, p90, p99 = (np.nanmean(line.values) for line in lines)
    assert 0.01 < p50 < p90 < p99 < 0.25


def test_instant_values_use_the_rule_language(fleet_store: tuple[SeriesQueries, SyntheticFleet]) -> None:
    q, _ = fleet_store
    util = q.instant_one("avg(gpu_utilization_ratio)", T0)
    assert util is not None and 0 < util <= 1
    assert q.instant_one("avg(no_such_metric)", T0) is None
