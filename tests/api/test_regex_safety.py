"""Regular expressions cannot stall the service: label matchers, label_replace and silence
matchers use RE2 (linear time, Prometheus's syntax). Patterns that make Python's backtracking
`re` run for minutes on a 40-character label value answer at once, and `/health` answers
beside them; patterns RE2 does not take (backreferences) are a 400 naming the expression."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from alerts.notify.matchers import Matcher as SilenceMatcher
from infermeter.settings import GpuSettings, Settings, StoreSettings
from store import ManualClock
from store.series_index import Matcher
from tests.conftest import T0
from tests.service import serve

EVIL = "([a-z_]+)+!"  # exponential under backtracking on a long run of letters without "!"
VALUE = "a" * 40


@pytest.fixture
def service(sqlite_url: str) -> Iterator[str]:
    settings = Settings(store=StoreSettings(url=sqlite_url), gpu=GpuSettings(nvml="off"))
    with serve(settings, ManualClock(T0)) as (base, _runtime):
        body = {"samples": [{"metric": "gpu_util", "labels": {"host": VALUE}, "ts": T0, "value": 1}]}
        assert httpx.post(f"{base}/api/v1/samples", json=body).status_code < 300
        yield base


def test_matchers_take_linear_time() -> None:
    started = time.monotonic()
    assert not Matcher("host", "=~", EVIL).matches(VALUE)
    assert Matcher("host", "!~", EVIL).matches(VALUE)
    assert not SilenceMatcher("host", "=~", EVIL).matches({"host": VALUE})
    assert time.monotonic() - started < 1.0  # Python's re: hours for this value
    assert Matcher("gpu", "=~", "1|2").matches("2") and not Matcher("gpu", "=~", "1|2").matches("12")  # anchored
    with pytest.raises(ValueError, match="bad regular expression"):
        Matcher("host", "=~", r"(a)\1")  # RE2 has no backreferences, nor has Prometheus


def test_an_evil_selector_answers_at_once_and_health_stays_responsive(service: str) -> None:
    base = service
    health: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            started = time.monotonic()
            httpx.get(f"{base}/health", timeout=30)
            health.append(time.monotonic() - started)
            time.sleep(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        started = time.monotonic()
        for path, params in (("/api/v1/series", {"match[]": f'{{__name__=~"{EVIL}"}}'}),
                             ("/api/v1/query", {"query": f'gpu_util{{host=~"{EVIL}"}}', "time": str(T0 / 1000)}),
                             ("/api/v1/query", {"query": f'label_replace(gpu_util, "x", "$1", "host", "{EVIL}")',
                                                "time": str(T0 / 1000)})):
            reply = httpx.get(f"{base}{path}", params=params, timeout=30)
            assert reply.status_code == 200, reply.text
        assert time.monotonic() - started < 5.0
    finally:
        stop.set()
        prober.join()
    assert health and max(health) < 1.0
    reply = httpx.get(f"{base}/api/v1/query", params={"query": r'gpu_util{host=~"(a)\\1"}', "time": str(T0 / 1000)})
    assert reply.status_code == 400 and reply.json()["errorType"] == "bad_data"
    assert "regular expression" in reply.json()["error"]


def test_remembered_answers_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import store.regex as regex

    monkeypatch.setattr(regex, "_MEMO_TOTAL", 100)
    one, two = regex.label_regex("gpu-[0-9]+"), regex.label_regex("node-.*")
    for i in range(80):
        assert one.fullmatch(f"gpu-{i}") and not two.fullmatch(f"gpu-{i}")
    assert len(one._memo) + len(two._memo) <= 100  # cleared on the way, answers still right
    assert one.fullmatch("gpu-7") and not one.fullmatch("gpu-x")
