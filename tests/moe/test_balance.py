"""The balance figures against hand-computed values, and the recording rules against them."""

from __future__ import annotations

import math

import pytest

from alerts.defaults import default_rule_dicts, default_rule_groups
from alerts.moe_rules import recording_rules
from alerts.thresholds import Thresholds
from moe.balance import js_divergence, layer_balance
from promql import EvalContext, Vector, parse
from promql.sources import MemorySource
from store.types import SeriesKey
from tests.alerts.rule_harness import T0
from worker.moe import zipf_shares


def test_balance_figures_by_hand() -> None:
    b = layer_balance([30, 10, 0, 0])  # mean 10
    assert b.utilization == (3.0, 1.0, 0.0, 0.0)
    assert b.max_over_mean == 3.0
    assert b.cv == pytest.approx(math.sqrt((400 + 0 + 100 + 100) / 4) / 10)
    assert b.dead_fraction == 0.5 and b.dead_experts == (2, 3)
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert b.diversity == pytest.approx(math.exp(h) / 4)
    even = layer_balance([5, 5, 5, 5])
    assert (even.max_over_mean, even.cv, even.diversity, even.js_divergence) == (1.0, 0.0, pytest.approx(1.0), 0.0)
    idle = layer_balance([0, 0])
    assert idle.tokens == 0 and idle.dead_fraction == 1.0


def test_js_divergence_bounds_and_expected_distribution() -> None:
    assert js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)
    assert js_divergence([1, 1], [2, 2]) == 0.0
    skewed = zipf_shares(8, 1.0)
    assert layer_balance([x * 1000 for x in skewed], expected=skewed).js_divergence == pytest.approx(0.0, abs=1e-12)
    assert layer_balance(skewed).js_divergence > 0.05
    with pytest.raises(ValueError, match="different lengths"):
        js_divergence([1, 2], [1, 2, 3])


def _source(loads: dict[str, list[float]]) -> MemorySource:
    """Counters per expert that first appear at a non-zero value, with bursty per-step increments
    and one restart (a counter reset) in layer "1"; over the last 10 min the rate is ``loads``."""
    src = MemorySource()
    for layer, per_expert in loads.items():
        for e, per_s in enumerate(per_expert):
            start = 1000.0 * (e + 1)
            samples, value = [], start
            for step in range(81):  # 20 min every 15 s
                burst = 3.0 if step % 4 == 0 else 1 / 3  # 3, 1/3, 1/3, 1/3: uneven, mean 1 per minute
                value += per_s * 15 * burst
                if layer == "1" and step == 70:
                    value = per_s * 15  # the worker restarted
                samples.append((T0 + step * 15_000, value))
            src.add(SeriesKey.of("moe_expert_tokens_total", model="m", layer=layer, expert=str(e), instance="w1"), samples)
    return src


def test_recording_rules_compute_what_the_python_figures_do() -> None:
    loads = {"0": [40.0, 10.0, 10.0, 0.0], "1": [5.0, 5.0, 5.0, 5.0]}
    src = _source(loads)
    at = T0 + 80 * 15_000
    figures = {}
    records = [r for g in default_rule_dicts(Thresholds())["groups"] for r in g["rules"]
               if r.get("record", "").startswith("moe:")]
    assert {r["record"] for r in records} >= {r["record"] for r in recording_rules(Thresholds())}
    for rule in records:
        value = EvalContext(src, at).evaluate(parse(rule["expr"]))
        assert isinstance(value, Vector), rule["record"]
        figures[rule["record"]] = {dict(lab).get("layer"): float(v) for lab, v in zip(value.labels, value.values)
                                   if dict(lab).get("expert") in (None, "0")}
    # the rate over 10 min from the samples themselves, per expert, is what the Python side gets
    for layer in ("0",):
        want = layer_balance(loads[layer])
        assert figures["moe:layer_max_over_mean:rate10m"][layer] == pytest.approx(want.max_over_mean, rel=0.02)
        assert figures["moe:layer_cv:rate10m"][layer] == pytest.approx(want.cv, rel=0.02)
        assert figures["moe:layer_diversity:rate10m"][layer] == pytest.approx(want.diversity, rel=0.02)
        assert figures["moe:layer_js_divergence_uniform:rate10m"][layer] == pytest.approx(want.js_divergence, rel=0.05)
        assert figures["moe:expert_utilization:ratio10m"][layer] == pytest.approx(want.utilization[0], rel=0.02)
    assert figures["moe:layer_dead_experts:ratio1d"] == {"0": 0.25, "1": 0.0}
    assert figures["moe:layer_max_over_mean:rate10m"]["1"] == pytest.approx(1.0, abs=0.02)  # the reset is not a spike


def test_unused_experts_are_a_weekly_notice_not_a_page() -> None:
    from tests.alerts.rule_harness import first_firing

    groups = [g for g in default_rule_groups() if g.name == "infermeter-moe-unused"]
    assert [g.interval_ms for g in groups] == [3_600_000]  # a day's window read hourly, not each minute

    def series(revived_day: float | None) -> dict:  # type: ignore[type-arg]
        out = {}
        for e in range(4):
            def value(t: float, e: int = e) -> float:
                if e == 3 and (revived_day is None or t < revived_day * 86_400):
                    return 500.0  # first seen non-zero, then nothing routed to it
                return 500.0 + 10.0 * t
            out[SeriesKey.of("moe_expert_tokens_total", model="m", layer="0", expert=str(e))] = value
        return out

    at, engine = first_firing(groups, "MoeExpertsUnused", series(None), 9 * 24 * 60, every_s=3600)
    assert at is not None and 7 * 86_400 <= at <= 7 * 86_400 + 2 * 3600  # unused from the first hour, then a week
    (rule, inst), = [(r, i) for r, i in engine.active() if r.name == "MoeExpertsUnused"]
    assert inst.labels["severity"] == "info" and inst.labels["notice"] == "weekly" and inst.value == 0.25
    assert first_firing(groups, "MoeExpertsUnused", series(5.0), 9 * 24 * 60, every_s=3600)[0] is None
