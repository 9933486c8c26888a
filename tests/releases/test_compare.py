"""Before/after comparisons: a known +20 % cost shift behind a deploy marker is reported with an
interval that excludes 0; pure (autocorrelated, bursty) noise is not sold as a change; too little
data is "not measurable". Statistics alone, then through markers and a real SQLite store."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import create_engine

from infermeter import db
from promql.sources import StoreSource
from releases.compare import QUANTITIES, compare_values
from releases.markers import MarkerError, MarkerStore
from releases.windows import Windows, compare_windows, table_lines
from store import ManualClock, Reader, StoreOptions, TimeSeriesStore
from store.types import Sample, SampleBatch, SeriesKey

COST = next(q for q in QUANTITIES if q.key == "cost_per_million_tokens")
TOKENS = next(q for q in QUANTITIES if q.key == "tokens_per_gpu")
T0 = 1_800_000_000_000
MIN = 60_000


def ar_noise(n: int, seed: int, sd: float = 0.05, phi: float = 0.7) -> np.ndarray:
    """AR(1) noise with occasional bursts: neighbouring minutes look alike, as 5 m rates do."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + rng.normal(0, sd)
    bursts = rng.random(n) < 0.03
    return out + bursts * rng.normal(0, 3 * sd, n)


def test_a_twenty_percent_shift_is_reported_with_an_interval_excluding_zero() -> None:
    found = []
    for seed in range(40):  # an hour a side of AR(1) noise (r = 0.7, bursts), 7 % standard deviation
        base = 5.0 * (1 + ar_noise(120, seed))
        before, after = base[:60], base[60:] * 1.2
        got = compare_values(COST, before, after, np.random.default_rng(seed))
        found.append(got.verdict == "worse" and got.low > 0 and got.p_value < 0.05)
        if got.significant:
            assert 0.1 < got.change < 0.3 and got.low < got.change < got.high
            assert compare_values(TOKENS, before, after, np.random.default_rng(seed)).verdict == "better"
    assert sum(found) >= 36  # power about 94 % at this noise


def test_pure_noise_is_no_significant_change() -> None:
    alarms = []
    for seed in range(80):
        values = 5.0 * (1 + ar_noise(120, 100 + seed))
        got = compare_values(COST, values[:60], values[60:], np.random.default_rng(seed))
        alarms.append(got.significant)
        if not got.significant:
            assert got.low <= 0 <= got.high or got.p_value >= 0.05
    assert sum(alarms) <= 8  # about 5 % expected: a test calibrated for noise this correlated


def test_not_measurable() -> None:
    few = compare_values(COST, np.asarray([5.0, 5.1]), np.ones(30), np.random.default_rng(0))
    assert few.verdict.startswith("not measurable: 2 values before, 30 after")
    zero = compare_values(COST, np.zeros(30), np.ones(30), np.random.default_rng(0))
    assert zero.verdict == "not measurable: zero before (no relative change)"
    nan = compare_values(COST, np.full(30, np.nan), np.ones(30), np.random.default_rng(0))
    assert nan.n_before == 0 and nan.verdict.startswith("not measurable")


def _store(tmp_path, clock: ManualClock, shift: float):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = create_engine(url)
    db.upgrade(engine)
    store = TimeSeriesStore(engine, clock, StoreOptions())
    store.open()
    n = 180 * 4  # 3 h every 15 s
    noise = ar_noise(n, 7, sd=0.03)
    util = 0.6 + ar_noise(n, 8, sd=0.02)
    cost = SeriesKey.of("infermeter_cost_per_million_tokens_dollars", scope="model", model="m")
    gpu = SeriesKey.of("gpu_utilization_ratio", host="n1", gpu="0")
    change_at = T0 + 90 * MIN
    for i in range(n):
        at = T0 + i * 15_000
        clock.set(at)
        level = 5.0 * (1 + noise[i]) * (1 + shift if at >= change_at else 1.0)
        store.append(SampleBatch.from_samples([Sample(cost, at, level), Sample(gpu, at, float(util[i]))]))
    return engine, store, change_at


@pytest.mark.parametrize(("shift", "verdict"), [(0.2, "worse"), (0.0, "no significant change")])
def test_compare_a_deploy_marker_over_a_real_store(tmp_path, shift: float, verdict: str) -> None:  # type: ignore[no-untyped-def]
    clock = ManualClock(T0)
    engine, store, change_at = _store(tmp_path, clock, shift)
    try:
        markers = MarkerStore(engine, clock)
        marker = markers.add("deploy", model="m", version="v2", at_ms=change_at, actor="ci")
        assert markers.nearest_before(change_at + 30 * MIN, "m") == marker
        assert markers.nearest_before(change_at - MIN, "m") is None
        result = compare_windows(StoreSource(Reader(store)), Windows(marker.at_ms), np.random.default_rng(1),
                                 model="m", marker=marker)
    finally:
        store.close(flush=False)
        engine.dispose()
    by_key = {c.key: c for c in result.changes}
    assert by_key["cost_per_million_tokens"].verdict == verdict
    if shift:
        assert by_key["cost_per_million_tokens"].low > 0 and by_key["cost_per_million_tokens"].change == pytest.approx(0.2, abs=0.05)
    assert by_key["utilization"].verdict == "no significant change"
    assert by_key["ttft_p99"].verdict.startswith("not measurable: 0 values")  # no histogram in this store
    text = "\n".join(table_lines(result))
    assert "cost per 1M tokens" in text and verdict in text
    assert result.to_json()["marker"]["version"] == "v2"


def test_markers_are_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    db.upgrade(engine)
    markers = MarkerStore(engine, ManualClock(T0))
    with pytest.raises(MarkerError, match="kind: must be one of"):
        markers.add("rollout")
    with pytest.raises(MarkerError, match="needs model and version"):
        markers.add("deploy", model="m")
    with pytest.raises(MarkerError, match="in the future"):
        markers.add("config", at_ms=T0 + 3_600_000)
    fleet = markers.add("config", message="NCCL_BLOCKING_WAIT=1", at_ms=T0 - MIN)
    assert markers.between(T0 - 2 * MIN, T0, model="other") == [fleet]  # fleet-wide markers apply to every model
    assert fleet.describe() == "config all models: NCCL_BLOCKING_WAIT=1"
    engine.dispose()
