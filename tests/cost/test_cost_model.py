"""Cost arithmetic checked against hand-computed cases, through a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cost.compute import CostCalculator, instance_host
from cost.ledger import HOUR_MS, CostLedger, period_start_ms
from cost.prices import CostSettings, PriceBook
from store import ManualClock, TimeSeriesStore
from store.reader import Reader
from store.types import Sample, SampleBatch, SeriesKey
from tests.conftest import T0, StoreFactory

H100 = "NVIDIA H100 80GB HBM3"
STEP = 15_000
WARMUP = 5 * 60_000  # samples start 5 min early so the first minute's counter increase is known


def _gpu(host: str, gpu: str, util: float, watts: float) -> list[tuple[SeriesKey, float, float]]:
    labels = {"host": host, "gpu": gpu, "uuid": f"GPU-{host}-{gpu}", "gpu_model": H100}
    return [
        (SeriesKey.of("gpu_utilization_ratio", labels), util, 0.0),
        (SeriesKey.of("gpu_power_watts", labels), watts, 0.0),
        (SeriesKey.of("gpu_energy_joules_total", labels), 0.0, watts),  # counter: rate in J/s
    ]


def _tokens(model: str, instance: str, per_s: float, tenant: str | None = None) -> list[tuple[SeriesKey, float, float]]:
    labels = {"model": model, "instance": instance, "job": "vllm"}
    if tenant:
        labels["tenant"] = tenant
    return [
        (SeriesKey.of("inference_generation_tokens_total", labels), 0.0, per_s),
        (SeriesKey.of("inference_prompt_tokens_total", labels), 0.0, per_s * 2),
        (SeriesKey.of("inference_requests_total", {**labels, "outcome": "success"}), 0.0, per_s / 100),
    ]


def _fill(store: TimeSeriesStore, clock: ManualClock, series: list[tuple[SeriesKey, float, float]], end_ms: int) -> None:
    """Gauges hold their value; counters grow at their rate. One append per minute of samples."""
    t = T0 - WARMUP
    while t <= end_ms:
        clock.set(t)
        batch = []
        for key, gauge, rate in series:
            value = gauge if rate == 0 else rate * (t - (T0 - WARMUP)) / 1000
            batch.append(Sample(key, t, value))
        store.append(SampleBatch.from_samples(batch))
        t += STEP


def _book() -> PriceBook:
    return PriceBook(
        CostSettings.model_validate(
            {
                "gpu_prices": [
                    {"gpu_model": "H100", "purchase_class": "on_demand", "dollars_per_gpu_hour": 4.0},
                    {"gpu_model": "H100", "purchase_class": "on_demand", "dollars_per_gpu_hour": 6.0,
                     "effective_from": datetime.fromtimestamp((T0 + 30 * 60_000) / 1000, UTC).isoformat()},
                    {"gpu_model": "H100", "purchase_class": "spot", "dollars_per_gpu_hour": 1.5},
                    {"gpu_model": "*", "purchase_class": "on_demand", "dollars_per_gpu_hour": 99.0},
                ],
                "electricity": [{"dollars_per_kwh": 0.10, "pue": 1.5}],
                "overhead": [{"dollars_per_node_hour": 1.0}],
                "nodes": [{"host": "n2", "purchase_class": "spot"}],
                "budgets": [{"scope": "fleet", "cost_per_million_tokens": 20.0, "spend_per_period": 1000.0}],
            }
        )
    )


@pytest.fixture
def priced(make_store: StoreFactory, clock: ManualClock) -> tuple[TimeSeriesStore, CostLedger]:
    store = make_store()
    series = (
        _gpu("n1", "0", 0.8, 300.0)
        + _gpu("n1", "1", 0.0, 60.0)  # idle: its whole cost is the idle line
        + _gpu("n2", "0", 0.5, 300.0)
        + _tokens("llama", "n1:8000", 100.0)
        + _tokens("qwen", "n2:8000", 50.0)
    )
    _fill(store, clock, series, T0 + HOUR_MS)
    calc = CostCalculator(Reader(store), _book(), local_host="here")
    return store, CostLedger(store.engine, calc, _book(), clock, store.append)


def _sum(rows: list[dict[str, object]], **match: str) -> float:
    return sum(float(r["dollars"]) for r in rows if all(r.get(k) == v for k, v in match.items()))  # type: ignore[arg-type]


def test_hour_priced_by_hand(priced: tuple[TimeSeriesStore, CostLedger]) -> None:
    _, ledger = priced
    ledger.reprice_hour(T0)
    rows = ledger.spend(T0, T0 + HOUR_MS, ["node", "gpu", "model", "component", "purchase_class"])
    # n1/0 busy: 30 min at $4/h then 30 min at $6/h (price change mid-window) = $5
    assert _sum(rows, node="n1", gpu="0", component="gpu") == pytest.approx(5.0, rel=1e-6)
    # energy: 300 W for 1 h = 0.3 kWh × $0.10 × PUE 1.5
    assert _sum(rows, node="n1", gpu="0", component="energy") == pytest.approx(0.045, rel=1e-3)
    # n1/1 idle: rental + 60 W energy, all on the idle line, still attributed to the node's model
    assert _sum(rows, node="n1", gpu="1", component="idle") == pytest.approx(5.0 + 0.06 * 0.15, rel=1e-3)
    assert _sum(rows, node="n1", gpu="1", component="gpu") == 0.0
    # spot on n2
    assert _sum(rows, node="n2", gpu="0", component="gpu", purchase_class="spot") == pytest.approx(1.5, rel=1e-6)
    # overhead $1 per node-hour
    assert _sum(rows, node="n1", component="overhead") == pytest.approx(1.0, rel=1e-6)
    assert _sum(rows, node="n2", component="overhead") == pytest.approx(1.0, rel=1e-6)
    # attribution by host: n1 serves llama, n2 serves qwen
    by_model = {r["model"]: float(r["dollars"]) for r in ledger.spend(T0, T0 + HOUR_MS, ["model"])}  # type: ignore[arg-type]
    assert by_model["llama"] == pytest.approx(5 + 0.045 + 5.009 + 1, rel=1e-3)
    assert by_model["qwen"] == pytest.approx(1.5 + 0.045 + 1, rel=1e-3)
    tokens = {r["model"]: float(r["generated_tokens"]) for r in ledger.tokens(T0, T0 + HOUR_MS, ["model"])}  # type: ignore[arg-type]
    assert tokens["llama"] == pytest.approx(360_000, rel=1e-6)
    # totals reconcile: components sum to the whole
    total = _sum(ledger.spend(T0, T0 + HOUR_MS))
    by_component = ledger.spend(T0, T0 + HOUR_MS, ["component"])
    assert sum(float(r["dollars"]) for r in by_component) == pytest.approx(total)  # type: ignore[arg-type]


def test_recompute_reprices_history(priced: tuple[TimeSeriesStore, CostLedger], clock: ManualClock) -> None:
    store, ledger = priced
    ledger.reprice_hour(T0)
    before = _sum(ledger.spend(T0, T0 + HOUR_MS))
    cheaper = CostSettings.model_validate({**_book().settings.model_dump(), "gpu_prices": [
        {"gpu_model": "*", "purchase_class": "on_demand", "dollars_per_gpu_hour": 1.0},
        {"gpu_model": "*", "purchase_class": "spot", "dollars_per_gpu_hour": 1.0},
    ]})
    book = PriceBook(cheaper)
    repriced = CostLedger(store.engine, CostCalculator(Reader(store), book, "here"), book, clock)
    assert repriced.recompute(T0, T0 + HOUR_MS) == 1
    after = _sum(repriced.spend(T0, T0 + HOUR_MS))
    # three GPUs at $1 for the hour instead of 5 + 5 + 1.5
    assert after == pytest.approx(before - (5 + 5 + 1.5) + 3, rel=1e-3)


def test_live_series_cost_per_token_and_budget(priced: tuple[TimeSeriesStore, CostLedger], clock: ManualClock) -> None:
    store, ledger = priced
    clock.set(T0 + HOUR_MS)
    samples = {(s.series.name, s.series.get("scope"), s.series.get("model")): s.value for s in ledger.tick()}
    fleet_cost = samples[("infermeter_cost_dollars_per_hour", "fleet", "")]
    assert fleet_cost == pytest.approx(5 + 0.045 + 5.009 + 1.5 + 0.045 + 2, rel=1e-3)
    per_m = samples[("infermeter_cost_per_million_tokens_dollars", "model", "llama")]
    assert per_m == pytest.approx((5 + 0.045 + 5.009 + 1) / 0.36, rel=1e-3)
    assert samples[("infermeter_budget_cost_per_million_tokens_dollars", "fleet", "")] == 20.0
    assert samples[("infermeter_spend_period_dollars", "fleet", "")] == pytest.approx(fleet_cost, rel=1e-3)
    # per-GPU tokens/s: llama's 100 tok/s over n1's two GPUs
    gpu_series = [s for s in ledger.tick() if s.series.name == "gpu_generation_tokens_per_second"]
    gpu_tps = {(s.series.get("host"), s.series.get("gpu")): s.value for s in gpu_series}
    assert {s.series.get("instance") for s in gpu_series if s.series.get("host") == "n1"} == {"n1:8000"}
    assert gpu_tps[("n1", "0")] == pytest.approx(50.0, rel=1e-3)
    # the tick wrote the series into the store
    assert Reader(store).select(__import__("store.series_index", fromlist=["Selector"]).Selector("infermeter_cost_dollars_per_hour"))


def test_helpers() -> None:
    assert instance_host("127.0.0.1:8080", "box") == "box"
    assert instance_host("gpu-7:8000", "box") == "gpu-7"
    assert period_start_ms(T0 + 5 * 86_400_000, "month") == int(datetime(2027, 1, 1, tzinfo=UTC).timestamp() * 1000)
    with pytest.raises(ValueError):
        CostSettings.model_validate({"gpu_prices": [{"gpu_model": "x", "purchase_class": "lease", "dollars_per_gpu_hour": 1}]})


def test_a_node_serving_two_models_pays_one_node_hour_of_overhead(make_store: StoreFactory, clock: ManualClock) -> None:
    """Overhead is node-time, shared among the node's models by their tokens: two GPUs busy for
    an hour are one node-hour whichever models they serve, and each GPU is priced once."""
    store = make_store()
    series = (
        _gpu("n3", "0", 0.9, 300.0)
        + _gpu("n3", "1", 0.9, 300.0)
        + _tokens("llama", "n3:8000", 300.0)
        + _tokens("qwen", "n3:8001", 100.0)
    )
    _fill(store, clock, series, T0 + HOUR_MS)
    calc = CostCalculator(Reader(store), _book(), local_host="here")
    ledger = CostLedger(store.engine, calc, _book(), clock)
    ledger.reprice_hour(T0)
    rows = ledger.spend(T0, T0 + HOUR_MS, ["node", "model", "component"])
    assert _sum(rows, node="n3", component="overhead") == pytest.approx(1.0, rel=1e-6)
    assert _sum(rows, node="n3", model="llama", component="overhead") == pytest.approx(0.75, rel=1e-6)
    assert _sum(rows, node="n3", model="qwen", component="overhead") == pytest.approx(0.25, rel=1e-6)
    # both GPUs priced once each, at the book's H100 price (4 then 6 $/h: 5 $ each for the hour)
    assert _sum(rows, node="n3", component="gpu") == pytest.approx(10.0, rel=1e-6)
