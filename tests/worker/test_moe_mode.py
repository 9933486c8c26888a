"""The reference worker's MoE mode: routing follows the configured skew, the counts are exported
in the worker's dialect and mapped to ``moe_expert_tokens_total``, and the default rules fire on
the skew and stay quiet without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from alerts.defaults import default_rule_groups
from collector.exposition import parse_exposition
from collector.mapping.mapper import CanonicalMapper
from moe.balance import layer_balance
from store.types import SeriesKey
from tests.alerts.rule_harness import first_firing
from tests.moe.routing import expected_shares, routed_counts

pytest.importorskip("torch")
EXPERTS, TOP_K = 8, 2


@pytest.mark.parametrize("skew", [0.0, 1.0])
def test_collected_shares_match_the_configured_skew(model_dir: Path, skew: float) -> None:
    want = layer_balance(expected_shares(EXPERTS, TOP_K, skew))
    counts = routed_counts(model_dir, experts=EXPERTS, top_k=TOP_K, skew=skew, rounds=1, tokens_per_round=8000)[-1]
    assert len(counts) == 4  # ref-tiny's layers
    for row in counts:
        assert sum(row) == 8000 * TOP_K  # every token counted once per expert it went to
        got = layer_balance(row)
        assert got.max_over_mean == pytest.approx(want.max_over_mean, rel=0.08)
        assert got.js_divergence == pytest.approx(want.js_divergence, abs=0.01)
        assert [round(u, 1) for u in got.utilization] == pytest.approx([round(u, 1) for u in want.utilization], abs=0.15)


def test_router_config_is_checked() -> None:
    import torch

    from worker.moe import ExpertRouter

    with pytest.raises(ValueError, match="must divide the model's intermediate size 384"):
        ExpertRouter(layers=1, hidden=8, intermediate=384, experts=7, top_k=2, skew=0, seed=0,
                     device=torch.device("cpu"), dtype=torch.float32)
    with pytest.raises(ValueError, match="top_k 9"):
        ExpertRouter(layers=1, hidden=8, intermediate=384, experts=8, top_k=9, skew=0, seed=0,
                     device=torch.device("cpu"), dtype=torch.float32)


def test_exported_counts_map_to_the_canonical_series() -> None:
    from prometheus_client import generate_latest

    from worker.metrics import WorkerMetrics

    metrics = WorkerMetrics("mixtral-ref", 2048, lambda: None, expert_counts=lambda: [[5, 0], [1, 2]])
    text = generate_latest(metrics.registry).decode()
    assert 'moe_expert_tokens_total{engine="0",expert="0",layer="1",model_name="mixtral-ref"} 1.0' in text
    batch = parse_exposition(text, default_ts_ms=1_000).batch
    mapped = CanonicalMapper().map(batch, "vllm")
    got = {k.labels: v for k, v in zip(mapped.keys, mapped.values) if k.name == "moe_expert_tokens_total"}
    assert got[SeriesKey.of("x", engine="vllm", expert="1", layer="0", model="mixtral-ref").labels] == 0.0
    assert got[SeriesKey.of("x", engine="vllm", expert="1", layer="1", model="mixtral-ref").labels] == 2.0
    dense = WorkerMetrics("dense", 2048, lambda: None, expert_counts=lambda: None)
    assert "moe_expert_tokens" not in generate_latest(dense.registry).decode()


def _series_from_worker(model_dir: Path, skew: float) -> dict[SeriesKey, object]:
    """Twenty scrapes, 1 min apart, of a worker's cumulative counts (the first already non-zero)."""
    snaps = routed_counts(model_dir, experts=EXPERTS, top_k=TOP_K, skew=skew, rounds=21, tokens_per_round=200)
    series: dict[SeriesKey, object] = {}
    for layer in range(len(snaps[0])):
        for e in range(EXPERTS):
            values = [snap[layer][e] for snap in snaps]
            key = SeriesKey.of("moe_expert_tokens_total", model="m", layer=str(layer), expert=str(e))
            series[key] = lambda t, v=values: float(v[min(int(t // 60), 20)])
    return series


def test_imbalance_alert_fires_with_the_skew_and_not_without(model_dir: Path) -> None:
    groups = [g for g in default_rule_groups() if g.name == "infermeter-moe"]
    at, engine = first_firing(groups, "MoeExpertImbalance", _series_from_worker(model_dir, 1.0), 20, every_s=60)
    assert at is not None and 600 <= at <= 780
    fired = {dict(inst.labels)["layer"] for rule, inst in engine.active() if rule.name == "MoeExpertImbalance"}
    assert fired == {"0", "1", "2", "3"}
    assert first_firing(groups, "MoeRoutingUnexpected", _series_from_worker(model_dir, 1.0), 20, every_s=60)[0] is not None
    quiet = _series_from_worker(model_dir, 0.0)
    assert first_firing(groups, "MoeExpertImbalance", quiet, 20, every_s=60)[0] is None
    assert first_firing(groups, "MoeRoutingUnexpected", quiet, 20, every_s=60)[0] is None


def test_a_served_worker_in_moe_mode_exports_its_routing(make_worker) -> None:  # type: ignore[no-untyped-def]
    import httpx

    w = make_worker(moe={"experts": 8, "top_k": 2, "skew": 1.5}, served_model_name="moe-ref")
    before = httpx.get(f"{w.url}/metrics").text
    assert "moe_expert_tokens_total" in before  # present from the start, all zero: warm-up is not counted
    batch = parse_exposition(before, default_ts_ms=1).batch
    assert sum(v for k, v in zip(batch.keys, batch.values) if k.name == "moe_expert_tokens_total") == 0
    r = httpx.post(f"{w.url}/v1/generate", json={"prompt": "hello experts", "max_tokens": 8, "ignore_eos": True},
                   timeout=60)
    assert r.status_code == 200
    batch = parse_exposition(httpx.get(f"{w.url}/metrics").text, default_ts_ms=1).batch
    per_layer: dict[str, list[float]] = {}
    for key, value in zip(batch.keys, batch.values):
        if key.name == "moe_expert_tokens_total":
            assert key.get("model_name") == "moe-ref"
            per_layer.setdefault(key.get("layer"), []).append(float(value))
    assert sorted(per_layer) == ["0", "1", "2", "3"] and all(len(v) == EXPERTS for v in per_layer.values())
    totals = {sum(v) for v in per_layer.values()}
    assert len(totals) == 1  # every layer saw every token
    total = totals.pop()
    assert total % TOP_K == 0 and total >= (8 + 2) * TOP_K  # prompt and generated tokens, top_k experts each
