"""Headless Chromium for the dashboard's browser tests and benchmark (selenium, Debian's
chromium and chromium-driver)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = os.environ.get("INFERMETER_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("INFERMETER_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(os.environ.get("INFERMETER_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")) / "dashboard"

# Every graph has left its "loading" state, every table too, and Dash has no request in flight.
DRAWN_JS = """
const graphs = [...document.querySelectorAll('.js-plotly-plot')];
const states = graphs.map(g => (g.layout && g.layout.meta && g.layout.meta.state) || 'none');
const tables = [...document.querySelectorAll('.panel-message, .panel-data')].map(e => e.className);
const busy = document.querySelectorAll('[data-dash-is-loading="true"]').length;
const panels = document.querySelectorAll('.panel').length;
return {states, tables, busy, panels, ids: graphs.map(g => g.parentElement && g.parentElement.id || g.id)};
"""


def available() -> bool:
    return shutil.which(CHROMIUM) is not None and shutil.which(CHROMEDRIVER) is not None


def chrome(width: int = 1400, height: int = 2400) -> webdriver.Chrome:
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--disable-extensions", "--mute-audio"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def drawn_state(driver: webdriver.Chrome) -> dict[str, Any]:
    state: dict[str, Any] = driver.execute_script(DRAWN_JS)
    return state


def wait_drawn(driver: webdriver.Chrome, panels: int, graphs: int, timeout_s: float = 30.0) -> dict[str, Any]:
    """Poll until ``panels`` panels, ``graphs`` of them plotted, are on the page and none is
    loading; returns their states."""
    deadline = time.monotonic() + timeout_s
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        state = drawn_state(driver)
        loading = "loading" in state["states"] or any("loading" in t for t in state["tables"])
        if state["panels"] == panels and len(state["states"]) == graphs and not loading and not state["busy"]:
            return state
        time.sleep(0.02)
    raise TimeoutError(f"the page did not finish drawing: {state}")


def severe_logs(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def figure(driver: webdriver.Chrome, graph_id: str) -> dict[str, Any]:
    """The drawn figure of a dcc.Graph (plotly's own data and layout on the element)."""
    found: dict[str, Any] = driver.execute_script(
        "const g = document.querySelector('#' + arguments[0] + ' .js-plotly-plot');"
        "return g ? {data: g.data.map(t => ({name: t.name, type: t.type, x: t.x ? t.x.length : 0,"
        " y: Array.isArray(t.y) ? t.y : [], rows: t.z ? t.z.length : 0})), meta: g.layout.meta || {}} : null;",
        graph_id,
    )
    return found


def wait_for(check: Callable[[], object], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise TimeoutError("condition not met")


def choose(driver: WebDriver, dropdown_id: str, label: str) -> None:
    """Open a dropdown and click the option labelled ``label``, as a person would."""
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, f"#{dropdown_id} .Select-control"))
    driver.find_element(By.CSS_SELECTOR, f"#{dropdown_id} .Select-control").click()
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, f"#{dropdown_id} .VirtualizedSelectOption"))
    option = next(o for o in driver.find_elements(By.CSS_SELECTOR, f"#{dropdown_id} .VirtualizedSelectOption") if o.text == label)
    option.click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)


__all__ = ["ARTIFACTS", "available", "chrome", "wait_drawn", "drawn_state", "severe_logs", "figure", "choose", "wait_for"]
