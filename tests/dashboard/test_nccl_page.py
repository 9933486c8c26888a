"""The NCCL page's timeout table and run-aware bandwidth traces: the pure builders, the read over a
real store (synthetic fleet, and series the NCCL collector itself wrote from log lines), and the
page in headless Chromium."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from collector.nccl import NcclLogSource
from dashboard.pages import PAGES
from dashboard.pages.nccl import TIMEOUT_EVENTS, TIMEOUT_HEADER, size_series, timeout_rows
from dashboard.queries import Filters, SeriesQueries, View, one_of
from dashboard.window import HOUR_MS, MINUTE_MS
from store import ManualClock, Reader, TimeSeriesStore
from tests.collector.nccl_fixtures import DESYNC_LOG, timeout_line
from tests.dashboard.browser import available, chrome, severe_logs, wait_drawn
from tests.dashboard.fleet_store import fleet_store
from tests.dashboard.service import make_settings, seed, serve_dashboard
from tests.dashboard.synthetic import FleetShape, SyntheticFleet

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z


def test_timeout_rows_are_newest_first_and_one_per_timeout() -> None:
    base = {"job": "nccl", "instance": "n1:nccl", "op": "ALLREDUCE", "seq": "12", "timeout_ms": "600000"}
    events = [
        ({**base, "rank": "0", "ran_for_ms": "600321"}, T0 - 60_000),
        ({**base, "rank": "0", "ran_for_ms": "600321", "lagging_ranks": "2-3"}, T0 - 60_000),  # its report, read later
        ({**base, "rank": "4", "op": "BROADCAST", "pg": "tp"}, T0),
    ]
    assert timeout_rows(events) == [
        ["2027-01-15 08:00:00", "n1:nccl", "4", "tp", "BROADCAST", "12", "600 s", "-", "-", "-"],
        ["2027-01-15 07:59:00", "n1:nccl", "0", "-", "ALLREDUCE", "12", "600 s", "600.321 s", "2-3", "-"],
    ]
    assert len(TIMEOUT_HEADER) == len(timeout_rows(events)[0])


def test_nccl_tests_traces_name_their_run() -> None:
    two = {"op": "all_reduce", "run": "sweep@1789", "nodes": "2", "nranks": "16", "size_bytes": "8"}
    assert size_series("nccl-tests", two) == "all_reduce (nccl-tests sweep@1789: 2 nodes, 16 ranks)"
    assert size_series("nccl-tests", {"op": "all_reduce", "run": "bench", "nodes": "unknown", "nranks": "4"}) == \
        "all_reduce (nccl-tests bench: 4 ranks)"
    assert size_series("nccl-tests", {"op": "all_reduce"}) == "all_reduce (nccl-tests)"  # series from before runs
    assert size_series("Inspector", {"op": "AllGather"}) == "AllGather (Inspector)"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TimeSeriesStore, ManualClock, SyntheticFleet]]:
    fleet = SyntheticFleet(FleetShape(nodes=2, gpus_per_node=4), T0 - HOUR_MS, T0)
    with fleet_store(tmp_path_factory.mktemp("nccl-page") / "store.db", fleet) as (opened, clock):
        yield opened, clock, fleet


def test_the_synthetic_timeout_is_a_row_in_range_and_for_its_node(store: tuple[TimeSeriesStore, ManualClock, SyntheticFleet]) -> None:
    q = SeriesQueries(Reader(store[0]), lambda instance: instance.rsplit(":", 1)[0])
    (event,) = q.nccl_timeout_events((), View(T0, HOUR_MS, Filters()))
    assert event[1] == T0 - 8 * MINUTE_MS and event[0]["rank"] == "3" and event[0]["lagging_ranks"] == "5"
    assert timeout_rows([event])[0][:3] == ["2027-01-15 07:52:00", "gpu-node-00:nccl", "3"]
    assert q.nccl_timeout_events((), View(T0, 5 * MINUTE_MS, Filters())) == []  # read 8 min ago: not in 5 min
    assert q.nccl_timeout_events((one_of("instance", ["gpu-node-01:nccl"]),), View(T0, HOUR_MS, Filters())) == []
    assert q.nccl_timeout_events(None, View(T0, HOUR_MS, Filters())) == []


def test_timeouts_the_collector_read_become_rows(store: tuple[TimeSeriesStore, ManualClock, SyntheticFleet], tmp_path: Path) -> None:
    opened, clock, _ = store
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "job.log"
    log.write_text(DESYNC_LOG + timeout_line(7, 9, op="ALLGATHER"))
    source = NcclLogSource([str(log)], tmp_path / "state.json", clock)
    at = T0 + 2 * MINUTE_MS
    clock.set(at)
    opened.append(source.collect_sync(at).batch)
    with log.open("a") as handle:  # rank 7's desync report comes in the next read
        handle.write("\t - [7] Timeout at collective: ALLGATHER, #9\n\t - To our best knowledge, ranks [1] are the lagging ranks\n")
    clock.set(at + 15_000)
    opened.append(source.collect_sync(at + 15_000).batch)
    asyncio.run(source.close())
    q = SeriesQueries(Reader(opened), lambda instance: instance)
    rows = [row for row in timeout_rows(q.nccl_timeout_events((), View(at + 15_000, 10 * MINUTE_MS))) if row[1] == "-"]
    assert [(r[0], r[2], r[4], r[5], r[8]) for r in rows] == [
        ("2027-01-15 08:02:00", "0", "ALLREDUCE", "12", "2-3"),
        ("2027-01-15 08:02:00", "4", "ALLREDUCE", "41208", "6"),
        ("2027-01-15 08:02:00", "5", "ALLREDUCE", "41208", "-"),
        ("2027-01-15 08:02:00", "7", "ALLGATHER", "9", "1"),  # one row, with the ranks that came later
    ]
    before = timeout_rows(q.nccl_timeout_events((), View(at, 10 * MINUTE_MS)))
    assert [r[8] for r in before if r[1] == "-"] == ["2-3", "6", "-", "-"]  # before the report was read


# -- in the browser -------------------------------------------------------------------------------
TOKEN = "nccl-s3cret"


@pytest.mark.slow
@pytest.mark.skipif(not available(), reason="needs Debian's chromium and chromium-driver")
def test_the_nccl_page_lists_the_timeout_in_a_table(tmp_path: Path) -> None:
    settings, config = make_settings(tmp_path, token=TOKEN)
    seed(settings, config, T0, hours=1, alerts=False)
    page = next(p for p in PAGES if p.name == "NCCL")
    with serve_dashboard(settings, ManualClock(T0), config) as (base, _runtime, _app):
        driver = chrome()
        try:
            driver.get(f"{base}/dashboard/?token={TOKEN}")
            driver.get(f"{base}/dashboard/{page.path.lstrip('/')}")
            state = wait_drawn(driver, len(page.panels), sum(1 for p in page.panels if p.kind == "graph"))
            assert state["states"] == ["data"] * 4, state
            table = driver.find_element(By.ID, TIMEOUT_EVENTS.id)
            cells = [c.text for c in table.find_elements(By.CSS_SELECTOR, "tbody tr td")]
            assert cells == ["2027-01-15 07:52:00", "gpu-node-00:nccl", "3", "-", "ALLREDUCE", "73104", "600 s", "600.031 s",
                             "5", "-"]
            assert [h.text for h in table.find_elements(By.CSS_SELECTOR, "thead th")] == TIMEOUT_HEADER
            assert "1 timeout;" in table.text
            assert severe_logs(driver) == []
        finally:
            driver.quit()
