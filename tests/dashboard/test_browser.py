"""The dashboard in real headless Chromium against the real service on loopback, over a store
seeded with a synthetic fleet: every page draws data, the console stays free of errors, a
filter change changes what is drawn, a failing panel stays in its box. A screenshot of every
page is written to ``test-artifacts/dashboard/`` (``INFERMETER_TEST_ARTIFACTS`` moves it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from access.principal import Role
from dashboard.pages import PAGES, Page
from infermeter.runtime import Runtime
from store import ManualClock
from tests.dashboard.browser import (
    ARTIFACTS,
    available,
    choose,
    chrome,
    figure,
    severe_logs,
    wait_drawn,
    wait_for,
)
from tests.dashboard.fakes import FakeForecasts, flat_forecast
from tests.dashboard.service import make_settings, seed, serve_dashboard

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not available(), reason="needs Debian's chromium and chromium-driver")]
T0 = 1_800_000_000_000
TOKEN = "browser-s3cret"
# Tables that are empty on this data by design (what they say is checked over HTTP).
EMPTY_BY_DESIGN = {"alerts-scale", "alerts-problems"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Runtime, WebDriver]]:
    tmp: Path = tmp_path_factory.mktemp("dash-browser")
    settings, config = make_settings(tmp, token=TOKEN)
    seed(settings, config, T0, hours=3)
    forecasts = FakeForecasts({"spend:fleet": flat_forecast(T0, 32.0, 4.0), "cost_per_mtok:fleet": flat_forecast(T0, 3.9, 0.3)})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\ndashboard screenshots: {ARTIFACTS}")
    with serve_dashboard(settings, ManualClock(T0), config, forecast=forecasts) as (base, runtime, _app):
        driver = chrome()
        try:
            driver.get(f"{base}/dashboard/?token={TOKEN}")  # signs in: a session cookie, then the token leaves the URL
            assert driver.current_url == f"{base}/dashboard/"
            yield base, runtime, driver
        finally:
            driver.quit()


def open_page(driver: WebDriver, base: str, page: Page) -> dict[str, Any]:
    driver.get(f"{base}/dashboard/{page.path.lstrip('/')}")
    return wait_drawn(driver, len(page.panels), sum(1 for p in page.panels if p.kind == "graph"))


def assert_every_page_draws(driver: WebDriver, base: str, screenshots: Path) -> None:
    """Every page: each graph drawn with data, each table (but those empty by design) with rows,
    a screenshot in ``screenshots``, and no severe message on the browser's console."""
    driver.get_log("browser")  # drop what was logged before (the sign-in page)
    for page in PAGES:
        state = open_page(driver, base, page)
        graphs = [p.id for p in page.panels if p.kind == "graph"]
        assert state["states"] == ["data"] * len(graphs), f"{page.name}: {list(zip(state['ids'], state['states']))}"
        tables = [p.id for p in page.panels if p.kind == "table" and p.id not in EMPTY_BY_DESIGN]
        assert sum("panel-data" in t for t in state["tables"]) >= len(tables), f"{page.name}: {state['tables']}"
        driver.save_screenshot(str(screenshots / f"{page.module.rsplit('.', 1)[-1]}.png"))
        assert severe_logs(driver) == [], page.name


def test_every_page_draws_data_without_console_errors(site: tuple[str, Runtime, WebDriver]) -> None:
    base, _, driver = site
    assert_every_page_draws(driver, base, ARTIFACTS)
    text = driver.find_element(By.ID, "alerts-active").text
    assert "GpuXidError" in text and "resolved" in text


def test_filters_and_range_change_what_is_drawn(site: tuple[str, Runtime, WebDriver]) -> None:
    base, _, driver = site
    requests = next(p for p in PAGES if p.name == "Requests")
    open_page(driver, base, requests)
    before = [t["name"] for t in figure(driver, "req-tokens")["data"]]
    assert {n.split(" ")[0] for n in before} == {"llama-3-70b", "qwen2-7b"}
    choose(driver, "dash-model", "qwen2-7b")
    wait_for(lambda: [t["name"] for t in figure(driver, "req-tokens")["data"]] != before)
    after = [t["name"] for t in figure(driver, "req-tokens")["data"]]
    assert after and all(n.startswith("qwen2-7b") for n in after)
    gpus = next(p for p in PAGES if p.name == "GPUs")
    driver.find_element(By.ID, "nav-gpus").click()  # the filters hold across pages
    wait_drawn(driver, len(gpus.panels), sum(1 for p in gpus.panels if p.kind == "graph"))
    heat = figure(driver, "gpu-heatmap")["data"][0]
    assert heat["rows"] == 4  # the GPUs of the node serving qwen2-7b, of 8
    driver.save_screenshot(str(ARTIFACTS / "gpus-filtered.png"))
    columns = heat["x"]
    choose(driver, "dash-range", "last 1h")
    wait_for(lambda: figure(driver, "gpu-heatmap")["data"][0]["x"] != columns)
    assert figure(driver, "gpu-heatmap")["data"][0]["x"] < columns
    driver.find_element(By.CSS_SELECTOR, "#dash-model .Select-clear-zone").click()
    wait_for(lambda: figure(driver, "gpu-heatmap")["data"][0]["rows"] == 8)
    assert severe_logs(driver) == []


def test_a_failing_panel_stays_in_its_box(site: tuple[str, Runtime, WebDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    base, runtime, driver = site
    assert runtime.alerting is not None

    def broken(*_args: object, **_kwargs: object) -> list[dict[str, object]]:
        raise RuntimeError("ledger table is locked")

    monkeypatch.setattr(runtime.alerting.ledger, "spend", broken)
    cost = next(p for p in PAGES if p.name == "Cost")
    state = open_page(driver, base, cost)
    by_id = dict(zip(state["ids"], state["states"]))
    assert by_id["cost-by-model"] == "error" and by_id["cost-idle"] == "error"
    assert by_id["cost-per-token"] == "data" and by_id["cost-budget"] == "data"
    assert "ledger table is locked" in driver.find_element(By.ID, "cost-by-model-box").text
    assert "GPU prices" in driver.find_element(By.ID, "cost-prices").text  # the rest of the page is drawn
    driver.save_screenshot(str(ARTIFACTS / "cost-with-a-failing-panel.png"))


def _fill(driver: WebDriver, element_id: str, text: str) -> None:
    box = driver.find_element(By.ID, element_id)
    box.clear()
    box.send_keys(text)


def test_admins_change_prices_and_budgets_from_the_cost_page(site: tuple[str, Runtime, WebDriver]) -> None:
    base, runtime, driver = site
    cost = next(p for p in PAGES if p.name == "Cost")
    open_page(driver, base, cost)
    wait_for(lambda: [e.text for e in driver.find_elements(By.ID, "dash-user")] == ["signed in: api_token (admin)"])
    driver.find_element(By.CSS_SELECTOR, f"#{'cost-editor'} summary").click()
    _fill(driver, "edit-gpu-model", "H100")
    _fill(driver, "edit-rate", "9.5")
    driver.find_element(By.ID, "edit-price-add").click()
    wait_for(lambda: driver.find_element(By.ID, "edit-price-result").text.startswith("Done"))
    assert runtime.alerting is not None
    assert runtime.alerting.book.gpu_price("NVIDIA H100 80GB HBM3", "on_demand", T0) == 9.5
    _fill(driver, "edit-budget-spend", "12345")
    driver.find_element(By.ID, "edit-budget-set").click()
    wait_for(lambda: driver.find_element(By.ID, "edit-budget-result").text.startswith("Done"))
    assert [b.spend_per_period for b in runtime.settings.cost.budgets if b.scope == "fleet"] == [12345]
    entries = runtime.access.audit.entries()
    assert [e["action"] for e in entries[:2]] == ["budget.set", "price.set"]
    assert entries[0]["actor"] == "api_token" and entries[0]["address"] == "127.0.0.1"
    driver.save_screenshot(str(ARTIFACTS / "cost-editor.png"))

    _, viewer_secret = runtime.access.tokens.create("finance-viewer", Role.VIEWER, "test")
    viewer = chrome()
    try:
        viewer.get(f"{base}/dashboard/cost?token={viewer_secret}")
        wait_for(lambda: [e.text for e in viewer.find_elements(By.ID, "dash-user")] == ["signed in: finance-viewer (viewer)"])
        viewer.find_element(By.CSS_SELECTOR, "#cost-editor summary").click()
        _fill(viewer, "edit-rate", "0.01")
        viewer.find_element(By.ID, "edit-price-add").click()
        wait_for(lambda: "needs an admin" in viewer.find_element(By.ID, "edit-price-result").text)
    finally:
        viewer.quit()
    assert runtime.alerting.book.gpu_price("NVIDIA H100 80GB HBM3", "on_demand", T0) == 9.5
    assert len(runtime.access.audit.entries()) == len(entries)


def test_change_markers_are_drawn_and_compared(site: tuple[str, Runtime, WebDriver]) -> None:
    base, runtime, driver = site
    (marker,) = runtime.markers.between(0, 1 << 62)
    requests = next(p for p in PAGES if p.name == "Requests")
    open_page(driver, base, requests)
    choose(driver, "dash-range", "last 6h")  # a test before may have narrowed it; the deploy was 1.5 h ago
    wait_for(lambda: driver.execute_script(
        "const g = document.querySelector('#req-tokens .js-plotly-plot'); return (g.layout.shapes || []).length > 0;"))
    drawn = driver.execute_script(  # the drawn layout's marker line and its label (plotly's own objects)
        "const g = document.querySelector('#req-tokens .js-plotly-plot');"
        "return {shapes: (g.layout.shapes || []).map(s => [s.name, s.x0]),"
        " notes: (g.layout.annotations || []).map(a => a.hovertext || '')};")
    assert [f"marker-{marker.id}", marker.at_ms] in drawn["shapes"]
    assert "deploy llama-3-70b v2: new weights" in drawn["notes"]
    releases = next(p for p in PAGES if p.name == "Releases")
    open_page(driver, base, releases)
    compared = driver.find_element(By.ID, "releases-compare").text
    assert "deploy llama-3-70b v2: new weights" in compared and "60 min before against 60 min after" in compared
    assert "cost per 1M tokens" in compared and "throughput per GPU" in compared
    assert "deploy" in driver.find_element(By.ID, "releases-markers").text
