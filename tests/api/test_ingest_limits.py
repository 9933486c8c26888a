"""Limits against cardinality and bad timestamps: labels per series, name and value lengths,
series per request and per tenant, the store's active-series limit, samples from the future."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from access.principal import Role
from infermeter.settings import Settings
from store.clock import ManualClock
from store.engine import create_store_engine
from store.options import StoreOptions
from store.series_index import REFUSED
from store.tsdb import RejectReason, TimeSeriesStore
from store.types import SampleBatch, SeriesKey
from tests.service import serve

T0 = 1_764_000_000_000
HOUR = 3_600_000


def _settings(tmp_path: Path, **store: object) -> Settings:
    return Settings.model_validate({
        "server": {"api_token": "admin-secret", "ingest": {"max_series_per_request": 500, "max_series_per_tenant": 300}},
        "store": {"url": f"sqlite:///{tmp_path / 'l.db'}", **store}, "gpu": {"nvml": "off"},
    })


def _push(base: str, samples: list[dict[str, object]], token: str = "admin-secret") -> httpx.Response:
    return httpx.post(f"{base}/api/v1/samples", content=json.dumps({"samples": samples}),
                      headers={"authorization": f"Bearer {token}", "content-type": "application/json"}, timeout=60)


def _series(n: int, metric: str = "m", ts: int = T0, start: int = 0) -> list[dict[str, object]]:
    return [{"metric": metric, "labels": {"i": str(start + i)}, "ts": ts, "value": 1} for i in range(n)]


def test_labels_and_request_size_are_limited_and_nothing_is_stored(tmp_path: Path) -> None:
    with serve(_settings(tmp_path), ManualClock(T0)) as (base, runtime):
        cases = {
            "31 labels exceed the limit of 30": [{"metric": "m", "labels": {f"l{i}": "v" for i in range(30)}, "value": 1}],
            "over the limit of 1024": [{"metric": "m", "labels": {"big": "x" * 1025}, "value": 1}],
            "exceeds the limit of 256": [{"metric": "m", "labels": {"n" * 257: "v"}, "value": 1}],
            "501 series in one request exceed the limit of 500": _series(501),
        }
        for message, samples in cases.items():
            answer = _push(base, samples)
            assert answer.status_code == 422, message
            assert message in answer.json()["error"] and "server.ingest." in answer.json()["error"]
        assert runtime.tsdb is not None and len(runtime.tsdb.index) == 0
        ok = _push(base, [{"metric": "m", "labels": {f"l{i}": "v" for i in range(29)}, "value": 1}])
        assert ok.status_code == 200 and ok.json()["data"]["accepted"] == 1
        # a series the store already holds (scraped before the limit, say) is not checked again
        wide = {f"w{i}": "v" for i in range(34)}
        runtime.store.append(SampleBatch.one_per_key([SeriesKey("wide", tuple(sorted(wide.items())))], T0, np.ones(1)))
        again = _push(base, [{"metric": "wide", "labels": wide, "ts": T0 + 1000, "value": 2}])
        assert again.status_code == 200 and again.json()["data"]["accepted"] == 1
        other = _push(base, [{"metric": "wide2", "labels": wide, "value": 2}])
        assert other.status_code == 422 and other.json()["error"].startswith('series wide2{w0="v"')


def test_a_sample_from_the_future_is_refused_and_does_not_block_real_ones(tmp_path: Path) -> None:
    with serve(_settings(tmp_path), ManualClock(T0)) as (base, _):
        future = _push(base, [{"metric": "clock", "ts": 7_258_118_400_000, "value": 1}])  # the year 2200
        assert future.json()["data"] == {"accepted": 0, "duplicates": 0, "rejected": {"too_far_in_future": 1}}
        near = _push(base, [{"metric": "clock", "ts": T0 + 9 * 60_000, "value": 2}])  # within the 10 min margin
        assert near.json()["data"]["accepted"] == 1
        now = _push(base, [{"metric": "clock", "ts": T0 + 8 * 60_000, "value": 3}])
        assert now.json()["data"]["accepted"] == 1  # in the out-of-order window of the near one


def test_tenants_have_their_own_series_budget(tmp_path: Path) -> None:
    with serve(_settings(tmp_path), ManualClock(T0)) as (base, runtime):
        _, a = runtime.access.tokens.create("team-a", Role.OPERATOR, "test")
        _, b = runtime.access.tokens.create("team-b", Role.OPERATOR, "test")
        assert _push(base, _series(250), a).status_code == 200
        refused = _push(base, _series(100, start=250), a)
        assert refused.status_code == 422 and "tenant 'team-a' has created 250 series" in refused.json()["error"]
        assert _push(base, _series(250), a).status_code == 200  # known series cost nothing
        assert _push(base, _series(250, metric="other"), b).status_code == 200


def test_the_store_takes_at_most_max_series_active_series(tmp_path: Path) -> None:
    settings = _settings(tmp_path, max_series=400)
    ingest = settings.server.ingest.model_copy(update={"max_series_per_tenant": 0})
    settings = settings.model_copy(update={"server": settings.server.model_copy(update={"ingest": ingest})})
    with serve(settings, ManualClock(T0)) as (base, runtime):
        assert _push(base, _series(300)).status_code == 200
        over = _push(base, _series(200, metric="n"), "admin-secret")
        assert over.status_code == 422
        body = over.json()
        assert "store.max_series" in body["error"] and "400" in body["error"]
        assert body["data"]["accepted"] == 100 and body["data"]["rejected"] == {"series_limit": 100}
        assert runtime.tsdb is not None and len(runtime.tsdb.index) == 400
        assert _push(base, _series(300, ts=T0 + 1000)).status_code == 200  # known series still flow
        assert httpx.get(f"{base}/health").status_code == 200


@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_series_limit_counts_active_series_and_frees_room_as_series_go_idle(store_url: str) -> None:
    clock = ManualClock(T0)
    store = TimeSeriesStore(create_store_engine(store_url), clock, StoreOptions(max_series=3, idle_flush_ms=HOUR))
    store.open()
    keys = [SeriesKey.of("m", i=str(i)) for i in range(5)]
    ids = store.resolve(keys)
    assert (ids == REFUSED).sum() == 2 and store.active_series(clock.now_ms()) == 3
    batch = SampleBatch(keys, np.arange(5), np.full(5, T0), np.ones(5), key_ids=ids)
    result = store.append(batch)
    assert result.accepted == 3 and result.rejected == {RejectReason.SERIES_LIMIT: 2}
    clock.advance(2 * HOUR)  # the three went idle: room again
    later = store.append(SampleBatch.one_per_key(keys[3:], clock.now_ms(), np.ones(2)))
    assert later.accepted == 2 and store.active_series(clock.now_ms()) == 2
    future = store.append(SampleBatch.one_per_key(keys[3:4], clock.now_ms() + 11 * 60_000, np.ones(1)))
    assert future.rejected == {RejectReason.TOO_NEW: 1}
    store.close()
