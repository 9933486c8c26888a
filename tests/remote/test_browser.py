"""The dashboard of `up` on the remote backend in real headless Chromium: every page draws its
panels from a real VictoriaMetrics (seeded through `up`'s remote-write queue), with the console
free of errors -- the same pages, unchanged, as on the embedded store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from remote import RemoteReader
from store import ManualClock
from tests.dashboard.browser import ARTIFACTS, available, chrome
from tests.dashboard.fakes import FakeForecasts, flat_forecast
from tests.dashboard.service import MINUTE_MS, make_settings, seed, serve_dashboard
from tests.dashboard.test_browser import assert_every_page_draws
from tests.engines import VictoriaMetrics, needs_vm
from tests.remote.test_remote_backend import remote_settings, settle

pytestmark = [pytest.mark.slow, needs_vm,
              pytest.mark.skipif(not available(), reason="needs Debian's chromium and chromium-driver")]
TOKEN = "remote-s3cret"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, WebDriver]]:
    tmp: Path = tmp_path_factory.mktemp("remote-browser")
    vm = VictoriaMetrics(tmp / "vm")
    vm.start()
    end_ms = int(time.time() * 1000) // MINUTE_MS * MINUTE_MS - MINUTE_MS
    base_settings, config = make_settings(tmp, token=TOKEN)
    settings = remote_settings(base_settings, tmp, vm)
    try:
        seed(settings, config, end_ms, hours=3, settle=settle(vm))  # type: ignore[arg-type]
        forecasts = FakeForecasts({"spend:fleet": flat_forecast(end_ms, 32.0, 4.0),
                                   "cost_per_mtok:fleet": flat_forecast(end_ms, 3.9, 0.3)})
        with serve_dashboard(settings, ManualClock(end_ms), config, forecast=forecasts) as (base, runtime, _app):
            assert isinstance(runtime.reader, RemoteReader)
            driver = chrome()
            try:
                driver.get(f"{base}/dashboard/?token={TOKEN}")
                yield base, driver
            finally:
                driver.quit()
    finally:
        vm.stop()


def test_every_page_draws_from_the_engine_without_console_errors(site: tuple[str, WebDriver]) -> None:
    base, driver = site
    out = ARTIFACTS / "remote"
    out.mkdir(parents=True, exist_ok=True)
    assert_every_page_draws(driver, base, out)
    assert "GpuXidError" in driver.find_element(By.ID, "alerts-active").text
