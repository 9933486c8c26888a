"""A fresh install, as a newcomer first sees it: ten minutes of data, only the hour in progress
priced, default prices. "Spend per hour" and "Spend today" agree; the range picker starts at a
range that fits the data (unless the config or the URL says otherwise); the Cost page says
which prices are examples."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from selenium.webdriver.common.by import By

from cost.prices import CostSettings
from dashboard import cost_reads
from dashboard.app import initial_range, range_from_url
from dashboard.figures.common import state_of
from dashboard.pages import cost as cost_page
from dashboard.pages import overview
from dashboard.panel import PanelContext
from dashboard.queries import Filters
from dashboard.settings import DashboardSettings
from dashboard.sources import sources_from_runtime
from dashboard.window import DAY_MS, HOUR_MS, MINUTE_MS, fitted_range
from infermeter.runtime import Runtime, build_runtime
from infermeter.settings import GpuSettings, Settings, StoreSettings
from store import ManualClock
from store.types import SampleBatch, SeriesKey
from tests.dashboard import browser
from tests.dashboard.synthetic import FleetShape, SyntheticFleet
from tests.service import run_app

NOW = 1_800_000_000_000 + 20 * MINUTE_MS  # 08:20 UTC: the hour in progress is the only one priced
AGE = 10 * MINUTE_MS
CPU_NODE = "cpu-box"  # serves a model on CPUs only


# -- choosing the first range -----------------------------------------------------------------------
def test_the_first_range_is_the_smallest_preset_that_covers_the_data() -> None:
    six = 6 * HOUR_MS
    assert fitted_range(six, None) == six  # nothing known: the configured default
    assert fitted_range(six, 0) == 15 * MINUTE_MS  # never below 15 min
    assert fitted_range(six, 5 * MINUTE_MS) == 15 * MINUTE_MS
    assert fitted_range(six, 15 * MINUTE_MS) == 15 * MINUTE_MS
    assert fitted_range(six, 16 * MINUTE_MS) == HOUR_MS
    assert fitted_range(six, 2 * HOUR_MS) == 3 * HOUR_MS
    assert fitted_range(six, 6 * HOUR_MS + 1) == six  # older data keeps the default
    assert fitted_range(six, 40 * DAY_MS) == six
    assert fitted_range(DAY_MS, 8 * HOUR_MS) == 12 * HOUR_MS  # a longer configured default caps it


def test_a_range_in_the_url_picks_a_preset() -> None:
    six = 6 * HOUR_MS
    assert range_from_url("?range=1h", six) == HOUR_MS
    assert range_from_url("?foo=1&range=15m", six) == 15 * MINUTE_MS
    assert range_from_url("?range=2h", six) == 3 * HOUR_MS  # not a preset: the next one up
    assert range_from_url("?range=1m", six) == 15 * MINUTE_MS and range_from_url("?range=90d", six) == 30 * DAY_MS
    assert range_from_url("", six) is None and range_from_url(None, six) is None
    assert range_from_url("?range=soon", six) is None and range_from_url("?range=90", six) is None


# -- example prices -----------------------------------------------------------------------------------
def test_example_prices_are_named_until_the_user_sets_them() -> None:
    default = CostSettings()
    notes = cost_reads.example_price_notes(default, cpu_nodes=0, gpus=True)
    assert len(notes) == 1 and "$2/GPU-hour" in notes[0] and "cost.gpu_prices" in notes[0]
    assert cost_reads.example_price_notes(default, cpu_nodes=0, gpus=False) == []
    own = CostSettings.model_validate({"gpu_prices": [{"gpu_model": "*", "dollars_per_gpu_hour": 2.0}]})
    assert cost_reads.example_price_notes(own, cpu_nodes=0, gpus=True) == []  # the user's own '*' price
    # the CPU node-hour price: named as an example until the user sets it
    cpu = cost_reads.example_price_notes(CostSettings(), cpu_nodes=1, gpus=False)
    assert cpu == [f"CPU node priced at the example ${CostSettings().cpu_dollars_per_node_hour:g}/node-hour — set cost.cpu_dollars_per_node_hour"]
    assert cost_reads.example_price_notes(CostSettings(), cpu_nodes=0, gpus=False) == []
    mine = CostSettings.model_validate({"cpu_dollars_per_node_hour": 0.2})
    assert cost_reads.example_price_notes(mine, cpu_nodes=1, gpus=False) == []


# -- a fresh store ------------------------------------------------------------------------------------
def fresh_settings(tmp: Path) -> Settings:
    return Settings(store=StoreSettings(url=f"sqlite:///{tmp / 'fresh.db'}"), gpu=GpuSettings(nvml="off"),
                    **({"worker": {"embedded": False}} if "worker" in Settings.model_fields else {}))


def seed_fresh(settings: Settings) -> None:
    """Ten minutes of one node (two GPUs), the ``up`` series a scrape writes, a model served on
    a node without GPUs, and the ledger priced as its minute tick does (the hour in progress)."""
    fleet = SyntheticFleet(FleetShape(nodes=1, gpus_per_node=2, models=("qwen2-7b",), nccl=False), NOW - AGE, NOW)
    extra = [SeriesKey.of("up", job="vllm", instance="gpu-node-00:8000"),
             SeriesKey.of("inference_requests_total", job="worker", instance=f"{CPU_NODE}:8000", model="tiny",
                          outcome="success"),
             # the target runs on CPUs only (as the embedded worker without a GPU writes it)
             SeriesKey.of("infermeter_target_gpu_info", job="worker", instance=f"{CPU_NODE}:8000", gpu="cpu",
                          source="config", target_job="worker", target_instance=f"{CPU_NODE}:8000")]
    clock = ManualClock(fleet.start_ms)
    runtime = build_runtime(settings, clock)
    runtime.store.open()
    try:
        ids = runtime.store.resolve(fleet.keys)
        for batch in fleet.batches():
            clock.set(int(batch.ts_ms[-1]))
            runtime.store.append(SampleBatch(batch.keys, batch.key_index, batch.ts_ms, batch.values, ids))
        stamps = np.arange(fleet.start_ms, NOW + 1, 15_000, dtype=np.int64)
        runtime.store.append(SampleBatch(extra, np.repeat([0, 1, 2], len(stamps)), np.tile(stamps, 3),
                                         np.concatenate([np.ones(len(stamps)), np.arange(len(stamps), dtype=np.float64),
                                                         np.ones(len(stamps))])))
        clock.set(NOW)
        assert runtime.alerting is not None
        runtime.alerting.ledger.recompute(fleet.start_ms, NOW)
        runtime.store.checkpoint(force=True)
    finally:
        runtime.store.close(flush=True)
        runtime.engine.dispose()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Runtime]]:
    settings = fresh_settings(tmp_path_factory.mktemp("fresh"))
    seed_fresh(settings)
    runtime = build_runtime(settings, ManualClock(NOW))
    from infermeter.api import create_app

    with run_app(create_app(runtime)) as base:
        yield base, runtime


def context(runtime: Runtime, settings: DashboardSettings | None = None) -> PanelContext:
    return PanelContext(sources_from_runtime(runtime), settings or DashboardSettings())


def kpi_value(figure: dict[str, Any], title: str) -> float | None:
    found = [t["value"] for t in figure["data"] if t["title"]["text"].startswith(title)]
    return float(found[0]) if found else None


@pytest.mark.slow
def test_spend_per_hour_and_spend_today_agree_on_the_hour_in_progress(fresh: tuple[str, Runtime]) -> None:
    ctx = context(fresh[1])
    view = ctx.view(6 * HOUR_MS, None, None)
    today = kpi_value(overview.kpis(ctx, view), "Spend today")
    chart = overview.spend(ctx, view)
    assert state_of(chart) == "data", chart["layout"]["meta"]
    traces = {t["name"]: t for t in chart["data"]}
    assert overview.HOURLY not in traces  # no closed hour yet
    partial = traces[overview.IN_PROGRESS]
    assert partial["x"] == [NOW - NOW % HOUR_MS] and partial["mode"] == "lines+markers"  # a lone point is drawn
    low, high = chart["layout"]["xaxis"]["range"]  # whole hours around it, not a few ms
    assert low < partial["x"][0] < high and high - low >= HOUR_MS
    assert today is not None and today > 0
    assert partial["y"][0] == pytest.approx(today, rel=1e-3)
    notes = " ".join(chart["layout"]["meta"]["notes"])
    assert f"spend today ${today:,.4g}" in notes and "no cost ledger rows" not in notes
    hourly = cost_reads.hourly_spend(ctx.sources, 0, NOW + HOUR_MS, Filters())
    assert hourly is not None and sum(hourly.values()) == pytest.approx(today, rel=1e-5)
    model = ctx.view(6 * HOUR_MS, ["qwen2-7b"], None)  # with a filter, both narrow the same way
    narrowed = kpi_value(overview.kpis(ctx, model), "Spend today")
    y = {t["name"]: t for t in overview.spend(ctx, model)["data"]}[overview.IN_PROGRESS]["y"][0]
    assert narrowed is not None and y == pytest.approx(narrowed, rel=1e-3)


@pytest.mark.slow
def test_a_fresh_store_starts_at_a_range_that_fits_it(fresh: tuple[str, Runtime]) -> None:
    runtime = fresh[1]
    ctx = context(runtime)
    earliest = ctx.queries.earliest_sample(NOW, 6 * HOUR_MS)
    assert earliest is not None and abs(earliest - (NOW - AGE)) <= MINUTE_MS
    assert initial_range(ctx) == 15 * MINUTE_MS
    assert initial_range(context(runtime, DashboardSettings.model_validate({"default_range": "3h"}))) == 3 * HOUR_MS  # configured
    later = PanelContext(replace(ctx.sources, clock=ManualClock(NOW + 7 * HOUR_MS)), DashboardSettings())
    assert initial_range(later) == 6 * HOUR_MS  # data older than the default range: the default
    hour_later = PanelContext(replace(ctx.sources, clock=ManualClock(NOW + 30 * MINUTE_MS)), DashboardSettings())
    assert initial_range(hour_later) == HOUR_MS


@pytest.mark.slow
def test_the_cost_page_names_the_example_prices(fresh: tuple[str, Runtime]) -> None:
    ctx = context(fresh[1])
    assert ctx.queries.cpu_nodes() == [CPU_NODE]
    view = ctx.view(6 * HOUR_MS, None, None)
    by_model = cost_page.breakdown(ctx, view)[0]
    assert state_of(by_model) == "data"
    assert any("placeholder $2/GPU-hour" in n for n in by_model["layout"]["meta"]["notes"])
    assert "set cost.gpu_prices" in str(cost_page.prices(ctx, view))
    assert "set cost.cpu_dollars_per_node_hour" in str(cost_page.prices(ctx, view))


@pytest.mark.slow
@pytest.mark.skipif(not browser.available(), reason="needs Debian's chromium and chromium-driver")
def test_the_browser_shows_a_fresh_store_in_a_short_range(fresh: tuple[str, Runtime]) -> None:
    base = fresh[0]
    driver = browser.chrome(height=1600)
    try:
        def shown() -> str:
            found = driver.find_elements(By.CSS_SELECTOR, "#dash-range .Select-value-label")
            return str(found[0].text) if found else ""

        driver.get(f"{base}/dashboard/")
        browser.wait_for(lambda: shown() == "last 15m")
        browser.wait_for(lambda: (browser.figure(driver, "overview-spend") or {}).get("meta", {}).get("state") == "data")
        names = [t["name"] for t in browser.figure(driver, "overview-spend")["data"]]
        assert overview.IN_PROGRESS in names
        browser.ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(browser.ARTIFACTS / "first-run-overview.png"))
        driver.get(f"{base}/dashboard/cost?range=1h")  # the URL wins over the fitted range
        browser.wait_for(lambda: shown() == "last 1h")
        browser.wait_for(lambda: "placeholder $2/GPU-hour" in driver.find_element(By.ID, "cost-prices").text)
        driver.save_screenshot(str(browser.ARTIFACTS / "first-run-cost.png"))
        assert browser.severe_logs(driver) == []
    finally:
        driver.quit()
