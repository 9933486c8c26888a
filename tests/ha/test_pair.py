"""Two real `infermeter up` processes as an HA pair on real PostgreSQL and VictoriaMetrics, a real
webhook receiver on loopback: exactly one leads; kill -9 of the leader hands over within two
evaluation intervals with every notification delivered once and pending alerts keeping their
`for` start; a leader paused past its lease (SIGSTOP) stands down on SIGCONT without sending."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.dashboard.browser import available as browser_available
from tests.dashboard.browser import chrome, wait_for
from tests.engines import VictoriaMetrics, needs_vm, wait_until
from tests.ha.pair_harness import (
    Deliveries,
    UpProcess,
    account,
    logs_on_failure,
    outbox_ids,
    push_probe,
    quiet,
    receiver_app,
    running_pair,
    wait_drained,
)
from tests.service import run_app

pytestmark = needs_vm
INTERVAL_S = 2  # evaluation interval; the lease is 2 s, so a takeover may take 2.5 s


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    vm = VictoriaMetrics(tmp_path / "vm")
    vm.start()
    yield vm
    vm.stop()


def _active_at(proc: UpProcess, alertname: str) -> dict[str, str]:
    alerts = httpx.get(f"{proc.base}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return {a["labels"]["n"]: a["activeAt"] for a in alerts if a["labels"]["alertname"] == alertname}


def _text(driver: WebDriver, element_id: str) -> str:
    found = driver.find_elements(By.ID, element_id)
    return found[0].text if found else ""


def _assert_once(pg_url: str, deliveries: Deliveries) -> None:
    """After both stopped: every notification sent reached the receiver once, nothing else did."""
    got = deliveries.ids()
    lost, duplicated, pending = account(outbox_ids(pg_url), got)
    assert (lost, duplicated, pending) == (0, 0, 0), f"lost {lost}, duplicated {duplicated}, undelivered {pending}"
    assert got, "nothing was delivered"


def test_kill_9_of_the_leader_hands_over_without_losing_or_repeating_a_notification(
        tmp_path: Path, pg_url: str, engine: VictoriaMetrics) -> None:
    with running_pair(tmp_path, pg_url, engine.url, 3, interval_s=INTERVAL_S, lease_s=2) as (deliveries, leader, follower):
        wait_until(lambda: len(_active_at(leader, "HaProbePending")) == 3, 30, "three pending alerts")
        wait_until(lambda: len(deliveries.ids()) >= 6, 30, "notifications of the firing alerts")
        pending_before = _active_at(leader, "HaProbePending")
        firing_before = _active_at(leader, "HaProbeFiring")
        assert _active_at(follower, "HaProbePending") == pending_before  # the follower shows the stored state
        push_probe(engine.url, 3, int(time.time() * 1000))
        killed = time.monotonic()
        leader.kill()
        wait_until(lambda: follower.role() == "leader", 2 * INTERVAL_S + 1, "the follower to take over")
        took = time.monotonic() - killed
        assert took <= 2 * INTERVAL_S, f"takeover took {took:.2f} s"
        # the pending alerts keep their `for` start (not re-pending from now), the firing ones stay
        # the same firing alerts (no resolve-then-fire flap: that would show a new activeAt)
        assert _active_at(follower, "HaProbePending") == pending_before
        assert _active_at(follower, "HaProbeFiring") == firing_before
        sent_before = len(deliveries.ids())
        wait_until(lambda: len(deliveries.ids()) >= sent_before + 3, 60, "repeat notifications from the new leader")
        # the killed one comes back as the follower
        leader.start()
        wait_until(lambda: leader.role() == "follower", 30, "the restarted process to follow")
        quiet(follower)
        wait_drained(pg_url, deliveries, 90)
    _assert_once(pg_url, deliveries)


def test_a_paused_leader_stands_down_on_resume_without_sending(
        tmp_path: Path, pg_url: str, engine: VictoriaMetrics) -> None:
    with running_pair(tmp_path, pg_url, engine.url, 2, interval_s=INTERVAL_S, lease_s=2) as (deliveries, leader, follower):
        wait_until(lambda: len(deliveries.ids()) >= 2, 30, "first notifications")
        leader.signal(signal.SIGSTOP)
        wait_until(lambda: follower.role() == "leader", 3 * INTERVAL_S + 5, "the follower to take over")
        time.sleep(2)
        before = outbox_ids(pg_url)
        leader.signal(signal.SIGCONT)
        wait_until(lambda: leader.role() == "follower", 10, "the resumed process to stand down")
        assert follower.role() == "leader"
        assert "lost the lead" in leader.log.read_text()
        time.sleep(2 * INTERVAL_S)
        quiet(follower)
        rows = wait_drained(pg_url, deliveries, 90)
        assert set(before) <= set(rows)
        metrics = httpx.get(f"{leader.base}/metrics", timeout=5).text
        assert f'infermeter_ha_leader{{holder="{leader.name}"}} 0.0' in metrics
    _assert_once(pg_url, deliveries)


def test_both_started_at_once_exactly_one_leads(tmp_path: Path, pg_url: str, engine: VictoriaMetrics) -> None:
    with running_pair(tmp_path, pg_url, engine.url, 1, interval_s=INTERVAL_S, lease_s=2) as (_, leader, other):
        for _ in range(10):  # and it stays that way
            assert (leader.role(), other.role()) == ("leader", "follower")
            time.sleep(0.3)
        page = httpx.get(f"{leader.base}/metrics", timeout=5).text
        assert f'infermeter_ha_leader{{holder="{leader.name}"}} 1.0' in page
        # only the leader scrapes the central target
        wait_until(lambda: len(leader.scraped_targets()) == 1, 5, "the leader to scrape the central target")
        assert other.scraped_targets() == []
        if browser_available():  # the dashboard header says which one this is
            driver = chrome()
            try:
                for proc, word in ((leader, "HA leader"), (other, "HA follower")):
                    driver.get(f"{proc.base}/dashboard/")
                    wait_for(lambda w=word: w in _text(driver, "dash-role"), 30)  # type: ignore[misc]
            finally:
                driver.quit()
        # a silence set through the follower mutes on the leader (both read it from the database)
        ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        made = httpx.post(f"{other.base}/api/v1/silences", timeout=5, json={
            "matchers": [{"name": "alertname", "value": "HaProbeFiring", "isRegex": False, "isEqual": True}],
            "endsAt": ends, "createdBy": "test", "comment": "set on the follower"}).json()["silenceID"]
        wait_until(lambda: made in {s["id"] for s in httpx.get(f"{leader.base}/api/v1/silences", timeout=5).json()},
                   5, "the leader to see the follower's silence")
        # a token made through the follower signs in on the leader; a price set through the
        # follower prices on the leader; both changes are in the one audit log
        made_token = httpx.post(f"{other.base}/api/v1/tokens", timeout=5,
                                json={"name": "pair-ops", "role": "admin"}).json()["data"]
        auth = {"authorization": f"Bearer {made_token['token']}"}

        def signed_in() -> bool:
            answer = httpx.get(f"{leader.base}/api/v1/whoami", headers=auth, timeout=5)
            return answer.status_code == 200 and answer.json()["data"]["name"] == "pair-ops"

        wait_until(signed_in, 10, "the leader to take the follower's token")
        price = {"kind": "gpu", "gpu_model": "H100", "dollars_per_gpu_hour": 7.5}
        assert httpx.post(f"{other.base}/api/v1/prices", json=price, headers=auth, timeout=5).status_code == 201
        prices = httpx.get(f"{leader.base}/api/v1/prices", timeout=5).json()["data"]["gpu_prices"]
        assert [p["dollars_per_gpu_hour"] for p in prices if p["gpu_model"] == "H100"] == [7.5]
        audit = httpx.get(f"{leader.base}/api/v1/audit", headers=auth, timeout=5).json()["data"]
        assert [e["action"] for e in audit[:3]] == ["price.set", "token.create", "silence.create"]
        # a clean stop hands the lead over at once (the lease is released)
        stopped = time.monotonic()
        leader.stop()
        wait_until(lambda: other.role() == "leader", 5, "the other process to lead")
        assert time.monotonic() - stopped < 5
        wait_until(lambda: len(other.scraped_targets()) == 1, 5, "the new leader to scrape the central target")


def test_a_pair_refuses_what_it_cannot_share(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    cases: list[tuple[dict[str, object], str]] = [
        ({"url": f"sqlite:///{tmp_path / 'x.db'}"}, "ha.enabled needs a PostgreSQL store.url"),
        ({"url": "postgresql+psycopg://postgres@127.0.0.1:5432/x"}, "ha.enabled needs store.backend: remote"),
        ({"url": "postgresql+psycopg://postgres@127.0.0.1:5432/x", "backend": "remote",
          "remote": {"write_url": "http://127.0.0.1:1/api/v1/write", "query_url": "http://127.0.0.1:1"},
          "lease": "60s"}, "more than two alerts.evaluation_interval"),
    ]
    for store, message in cases:
        config = tmp_path / "bad.yaml"
        lease = store.pop("lease", "10s")
        config.write_text(json.dumps({"ha": {"enabled": True, "lease_duration": lease}, "store": store}))
        done = subprocess.run([sys.executable, "-m", "infermeter", "--config", str(config), "up"], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode != 0
        assert message in done.stdout + done.stderr


def test_a_leader_cut_off_from_the_database_stops_and_the_other_takes_over(
        tmp_path: Path, pg_url: str, engine: VictoriaMetrics) -> None:
    from sqlalchemy.engine import make_url

    from tests.ha.pair_harness import CuttableProxy, pair_config
    from tests.service import free_port

    deliveries = Deliveries()
    push_probe(engine.url, 2, int(time.time() * 1000))
    parsed = make_url(pg_url)
    proxy = CuttableProxy(parsed.port or 5432)
    via_proxy = parsed.set(port=proxy.port).render_as_string(hide_password=False)
    with run_app(receiver_app(deliveries)) as hook:
        port_a, port_b = free_port(), free_port()
        a = UpProcess(tmp_path, "a", pair_config(tmp_path, "a", via_proxy, engine.url, f"{hook}/hook", port_a), port_a)
        b = UpProcess(tmp_path, "b", pair_config(tmp_path, "b", pg_url, engine.url, f"{hook}/hook", port_b), port_b)
        try:
            with logs_on_failure(a, b):
                a.start()
                wait_until(lambda: a.role() == "leader", 30, "a to lead alone")
                b.start()
                wait_until(lambda: b.role() == "follower", 30, "b to follow")
                wait_until(lambda: len(deliveries.ids()) >= 2, 30, "first notifications")
                proxy.cut()
                cut = time.monotonic()
                wait_until(lambda: a.role() == "follower", 2 * INTERVAL_S, "a to stop leading without the database")
                wait_until(lambda: b.role() == "leader", 2 * INTERVAL_S + 1, "b to take over")
                assert time.monotonic() - cut <= 2 * INTERVAL_S + 1
                time.sleep(2 * INTERVAL_S)
                proxy.restore()
                time.sleep(2 * INTERVAL_S)  # a is back on the database: it stays the follower
                assert (a.role(), b.role()) == ("follower", "leader")
                quiet(b)
                wait_drained(pg_url, deliveries, 90)
        finally:
            a.stop()
            b.stop()
            proxy.close()
    _assert_once(pg_url, deliveries)
