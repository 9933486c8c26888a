"""The pure figure and table builders: data in, plotly figure dict (or Dash components) out."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dashboard.figures.breakdown import size_figure, spend_bars_figure
from dashboard.figures.common import compact, empty, error, points_per_trace, state_of
from dashboard.figures.fleet import EXTREMES, FLEET_LINES_MAX, WEBGL_POINTS, aligned, fleet_lines_figure
from dashboard.figures.gpus import (
    cap_events,
    events_figure,
    heatmap_figure,
    imbalance_figure,
    outlier_bars_figure,
)
from dashboard.figures.kpi import kpi_figure, subtitle
from dashboard.figures.series import LEGEND_MAX, budget_figure, forecast_figure, lines_figure, sparse
from dashboard.model import AlertRow, Band, Bar, BudgetLine, Crossing, Event, Kpi, Line, SizePoint
from dashboard.tables import alerts_table, prices_tables, table

T0 = 1_800_000_000_000
STEP = 60_000


def line(name: str, values: list[float], group: str = "") -> Line:
    ts = T0 + np.arange(len(values), dtype=np.int64) * STEP
    return Line(name, ts, np.asarray(values, dtype=np.float64), group)


def text_of(figure: dict) -> str:
    return " ".join(a["text"] for a in figure["layout"].get("annotations", []))


def test_compact_rounds_to_significant_digits_and_turns_nan_into_null() -> None:
    assert compact([0.123456, 0.5, math.nan]) == [0.1235, 0.5, None]
    assert compact([12345.678, 1.0]) == [12350.0, 0.0]
    assert compact([math.nan, math.inf]) == [None, None]
    assert compact([]) == []
    json.dumps(compact(np.random.default_rng(1).random(100) * 1e9))  # plain floats: JSON-able


def test_lines_figure_draws_one_trace_per_line_with_time_axis_and_thresholds() -> None:
    fig = lines_figure([line("a", [1, 2, 3]), line("b", [3, 2, 1])], empty_text="nothing", y_title="W",
                       thresholds=[(2.5, "limit")], scale=2.0)
    assert state_of(fig) == "data"
    assert [t["name"] for t in fig["data"]] == ["a", "b"]
    assert fig["data"][0]["x"] == [T0, T0 + STEP, T0 + 2 * STEP]
    assert fig["data"][0]["y"] == [2.0, 4.0, 6.0]
    assert fig["layout"]["xaxis"]["type"] == "date"
    assert fig["layout"]["shapes"][0]["y0"] == 5.0 and "limit" in text_of(fig)
    json.dumps(fig)


def test_lines_figure_without_data_is_an_empty_state_that_says_what_to_configure() -> None:
    fig = lines_figure([line("a", [math.nan, math.nan])], empty_text="add scrape.targets", y_title="W")
    assert state_of(fig) == "empty"
    assert fig["data"] == []
    assert fig["layout"]["xaxis"]["visible"] is False  # no blank axes
    assert "add scrape.targets" in text_of(fig)


def test_lines_figure_kinds_dashes_and_legend() -> None:
    bars = lines_figure([line("a", [1, 2])], empty_text="-", kind="bars")
    assert bars["data"][0]["type"] == "bar" and bars["layout"]["barmode"] == "stack"
    area = lines_figure([line("a", [1, 2]), line("b", [1, 2])], empty_text="-", kind="area", dashed={"b"})
    assert area["data"][0]["stackgroup"] == "one" and area["data"][1]["line"]["dash"] == "dash"
    many = lines_figure([line(f"g{i}", [1, 2]) for i in range(LEGEND_MAX + 1)], empty_text="-")
    assert not any(t["showlegend"] for t in many["data"])


def test_sparse_series_are_joined_dense_ones_keep_their_gaps() -> None:
    nan = math.nan
    assert sparse(np.asarray([1, nan, nan, 2, nan, nan, 3, nan]))
    assert not sparse(np.asarray([1, 2, 3, nan, nan, 4, 5, 6]))
    fig = lines_figure([line("per minute", [1, nan, nan, 2, nan, nan, 3])], empty_text="-")
    assert fig["data"][0]["connectgaps"] is True


def test_heatmap_has_one_row_per_gpu_and_a_column_per_step() -> None:
    rows = [line("node-1/0", [0.5, 0.6, 0.7]), line("node-1/1", [0.1, math.nan, 0.3]), line("node-1/2", [math.nan] * 3)]
    fig = heatmap_figure(rows, empty_text="no GPUs")
    trace = fig["data"][0]
    assert trace["type"] == "heatmap"
    assert trace["y"] == ["node-1/0", "node-1/1"]  # a GPU without data is left out
    assert trace["z"] == [[50.0, 60.0, 70.0], [10.0, None, 30.0]]
    assert points_per_trace(fig) == 3
    assert state_of(heatmap_figure([], empty_text="no GPUs")) == "empty"


def test_imbalance_counts_gpus_above_and_below_the_marks() -> None:
    rows = [line("a", [0.95, 0.5]), line("b", [0.2, 0.5]), line("c", [0.92, math.nan])]
    fig = imbalance_figure(rows, high=0.9, low=0.3, empty_text="-")
    by_name = {t["name"]: t["y"] for t in fig["data"]}
    assert by_name["max"] == [95.0, 50.0] and by_name["min"] == [20.0, 50.0]
    assert by_name["GPUs > 90%"] == [2.0, 0.0] and by_name["GPUs < 30%"] == [1.0, 0.0]


def test_outlier_bars_mark_flagged_gpus_red_and_draw_the_model_mean() -> None:
    bars = [Bar("n/0", 100, "m"), Bar("n/1", 98, "m"), Bar("n/2", 40, "m", flagged=True, note="-60%")]
    fig = outlier_bars_figure(bars, {"m": 79.3}, y_title="tok/s", empty_text="-", ratio=0.3)
    colours = fig["data"][0]["marker"]["color"]
    assert colours[2] == "#d62728" and colours[0] != "#d62728"
    assert fig["data"][0]["text"] == ["", "", "-60%"]
    mean = next(t for t in fig["data"] if t["name"] == "m mean")
    assert mean["y"] == [79.3] * 3
    assert state_of(outlier_bars_figure([], {}, y_title="", empty_text="ledger", ratio=0.3)) == "empty"


def test_events_timeline_groups_by_kind() -> None:
    events = [Event(T0, "n/1", "XID", "XID 79"), Event(T0 + STEP, "n/2", "ECC uncorrected", "+1"), Event(T0, "n/3", "XID", "XID 48")]
    fig = events_figure(events, empty_text="-")
    assert [t["name"] for t in fig["data"]] == ["ECC uncorrected", "XID"]
    assert fig["data"][1]["text"] == ["XID 79", "XID 48"]
    assert "no events" in text_of(events_figure([], empty_text="no events"))


def test_event_markers_are_capped_per_kind_by_merging_runs() -> None:
    many = [Event(T0 + i * STEP, f"n/{i % 4}", "ECC corrected", f"+{i}") for i in range(100)]
    few = [Event(T0, "n/9", "XID", "XID 79")]
    capped = cap_events(many + few, 20)
    corrected = [e for e in capped if e.kind == "ECC corrected"]
    assert len(corrected) <= 20 and {e.target for e in corrected} == {"n/0", "n/1", "n/2", "n/3"}
    assert [e for e in capped if e.kind == "XID"] == few
    assert any("events in a row" in e.detail for e in corrected)
    fig = events_figure(many, empty_text="-", max_per_kind=20)
    assert points_per_trace(fig) <= 20


def test_kpis_show_values_against_budgets_and_hints_for_missing_ones() -> None:
    fig = kpi_figure([
        Kpi("Cost per 1M tokens", 3.81, prefix="$", reference=9.0),
        Kpi("Spend this month", 88.86, prefix="$", reference=2500.0, reference_label="monthly budget", as_share=True, digits=4),
        Kpi("Tokens / s", None, hint="add scrape.targets"),
    ])
    indicators = fig["data"]
    assert [t["mode"] for t in indicators] == ["number+delta", "number"]
    assert indicators[0]["delta"]["reference"] == 9.0
    assert "3.6% of the $2,500 monthly budget" in indicators[1]["title"]["text"]
    assert "add scrape.targets" in text_of(fig)
    assert subtitle(Kpi("x", 1.0)) == ""


def test_spend_bars_stack_components_and_fold_the_tail_into_other() -> None:
    bars = [Bar("llama", 10, "gpu"), Bar("llama", 2, "idle"), Bar("qwen", 5, "gpu")] + [Bar(f"m{i}", 0.1, "gpu") for i in range(5)]
    fig = spend_bars_figure(bars, empty_text="-", top=3)
    gpu = next(t for t in fig["data"] if t["name"] == "gpu")
    assert gpu["y"] == ["llama", "qwen", "m0", "other"]
    assert gpu["x"][0] == 10.0 and gpu["x"][3] == pytest.approx(0.4)
    assert [t["name"] for t in fig["data"]] == ["gpu", "idle"]
    assert state_of(spend_bars_figure([], empty_text="ledger")) == "empty"


def test_size_figure_uses_a_log_size_axis() -> None:
    fig = size_figure([SizePoint("AllReduce", 1 << 20, 2e10), SizePoint("AllReduce", 1 << 28, 1.6e11)], y_title="GB/s",
                      empty_text="-", scale=1e-9)
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert fig["data"][0]["y"] == [20.0, 160.0]


def band(start: int, hours: int, level: float) -> Band:
    ts = start + np.arange(hours, dtype=np.int64) * 3_600_000
    mean = np.full(hours, level)
    return Band(ts, mean, mean - 1, mean + 1, mean - 2, mean + 2)


def test_forecast_figure_draws_the_band_or_says_there_is_no_forecast() -> None:
    history = [line("spend $/h", [30, 31, 29])]
    without = forecast_figure(history, None, empty_text="ledger", no_forecast_text="no forecast yet: run it")
    assert state_of(without) == "data" and "no forecast yet" in text_of(without)
    with_band = forecast_figure(history, band(T0, 72, 30.0), empty_text="ledger", no_forecast_text="-")
    names = [t["name"] for t in with_band["data"]]
    assert names[0] == "spend $/h" and "80 % interval" in names and "95 % interval" in names and "forecast" in names
    assert with_band["layout"]["shapes"][0]["x0"] == T0  # "now"
    assert state_of(forecast_figure([], None, empty_text="ledger", no_forecast_text="none")) == "empty"


def test_budget_figure_marks_the_crossings_and_missing_parts() -> None:
    actual = line("spent", [0, 10, 20])
    budget = BudgetLine(100.0, "fleet budget per month", T0, T0 + 30 * 86_400_000)
    crossing = Crossing(T0 + 10 * 3_600_000, T0 + 5 * 3_600_000, "crosses in 10 h")
    fig = budget_figure(actual, band(T0, 24, 50.0), budget, crossing, empty_text="-", no_forecast_text="-", no_budget_text="-")
    xs = sorted(s["x0"] for s in fig["layout"]["shapes"] if s.get("xref") == "x")
    assert xs == [T0 + 5 * 3_600_000, T0 + 10 * 3_600_000]
    assert "crosses in 10 h" in text_of(fig) and "fleet budget per month" in text_of(fig)
    bare = budget_figure(actual, None, None, None, empty_text="-", no_forecast_text="no forecast yet", no_budget_text="add cost.budgets")
    assert "no forecast yet" in text_of(bare) and "add cost.budgets" in text_of(bare)
    assert state_of(budget_figure(None, None, None, None, empty_text="ledger", no_forecast_text="-", no_budget_text="b")) == "empty"


def test_error_and_empty_states() -> None:
    assert state_of(error("boom")) == "error" and "boom" in text_of(error("boom"))
    assert state_of(empty("x")) == "empty"


def test_points_per_trace_counts_the_longest_trace() -> None:
    fig = lines_figure([line("a", list(range(7))), line("b", list(range(3)))], empty_text="-")
    assert points_per_trace(fig) == 7


def test_alert_table_folds_out_runbooks() -> None:
    rows = [AlertRow("GpuXidError", "firing", "critical", T0, "GPU 1 reported XID", "Drain the node.", {"gpu": "1"}, 1.0),
            AlertRow("GpuTemperatureHigh", "firing", "warning", T0, "hot", "", {"gpu": "2"}, 90.0, silenced=True)]
    html_text = json.dumps(alerts_table(rows, empty_text="-").to_plotly_json(), default=lambda o: o.to_plotly_json())
    assert "GpuXidError" in html_text and "Drain the node." in html_text and "runbook" in html_text
    assert html_text.count("silenced") == 1
    assert alerts_table([], empty_text="none firing").className == "panel-message panel-empty"
    assert table(["a"], [["1"]], empty_text="-").className == "panel-data"


def test_price_tables_render_every_section() -> None:
    book = {"gpu": [["H100", "on_demand", "$3.5", "2026-01-01 00:00", "in effect"]], "electricity": [], "overhead": [],
            "nodes": [], "budgets": []}
    text = json.dumps(prices_tables(book, "USD").to_plotly_json(), default=lambda o: o.to_plotly_json())
    assert "GPU prices" in text and "in effect" in text and "none configured (cost.budgets)" in text


def test_a_fleet_of_gpus_is_drawn_as_a_band_and_its_named_extremes() -> None:
    rng = np.random.default_rng(3)
    lines = [line(f"node-{i // 8}/{i % 8}", list(200 + 2 * i + rng.normal(0, 1, 30))) for i in range(40)]
    lines[5] = Line(lines[5].name, lines[5].ts_ms[::2], lines[5].values[::2])  # a GPU scraped at half the rate
    fig = fleet_lines_figure(lines, empty_text="none", y_title="watts", thresholds=[(300.0, "limit")])
    names = [t["name"] for t in fig["data"]]
    assert len(fig["data"]) == 3 + 2 * EXTREMES < FLEET_LINES_MAX
    assert names[1] == "fleet min–max (40 GPUs)" and names[2] == "fleet median"
    meta = fig["layout"]["meta"]["fleet"]
    assert meta["gpus"] == 40
    assert meta["highest"] == ["node-4/7", "node-4/6", "node-4/5"]  # highest mean first
    assert meta["lowest"] == ["node-0/0", "node-0/1", "node-0/2"]
    ts, matrix = aligned(lines)
    assert len(ts) == 30 and np.isnan(matrix[5, 1]) and matrix[5, 2] == lines[5].values[1]
    assert fig["data"][0]["y"] == compact(np.nanmin(matrix, axis=0))
    assert fig["data"][1]["y"] == compact(np.nanmax(matrix, axis=0))
    assert fig["data"][2]["y"] == compact(np.nanmedian(matrix, axis=0))
    assert fig["layout"]["shapes"][0]["y0"] == 300.0 and "40 GPUs" in text_of(fig)
    assert {t["type"] for t in fig["data"]} == {"scatter"}  # few points: SVG
    json.dumps(fig)


def test_fleet_figure_keeps_one_line_per_gpu_for_a_node_and_names_only_the_hot_end_when_asked() -> None:
    few = [line(f"gpu {i}", [float(i)] * 5) for i in range(FLEET_LINES_MAX)]
    assert [t["name"] for t in fleet_lines_figure(few, empty_text="none")["data"]] == [f"gpu {i}" for i in range(FLEET_LINES_MAX)]
    many = [line(f"gpu {i:02d}", [float(i)] * 5) for i in range(FLEET_LINES_MAX + 1)]
    fig = fleet_lines_figure(many, empty_text="none", lowest_too=False, scale=100.0, thresholds=[(0.5, "half")])
    assert fig["layout"]["meta"]["fleet"]["lowest"] == [] and len(fig["data"]) == 3 + EXTREMES
    assert fig["data"][3]["y"] == [1600.0] * 5 and fig["layout"]["shapes"][0]["y0"] == 50.0  # scaled like the data
    assert state_of(fleet_lines_figure([line("gpu 0", [math.nan])], empty_text="add gpu.nvml")) == "empty"


def test_fleet_figure_with_many_points_draws_its_lines_with_webgl() -> None:
    steps = WEBGL_POINTS // 4
    lines = [line(f"gpu {i:02d}", list(np.linspace(0, i, steps))) for i in range(32)]
    fig = fleet_lines_figure(lines, empty_text="none")
    assert [t["type"] for t in fig["data"]][2:] == ["scattergl"] * (1 + 2 * EXTREMES)
    assert fig["data"][1]["type"] == "scatter"  # the filled band stays SVG
