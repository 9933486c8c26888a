"""The acceptance check's fleet phase over recorded series: utilization and memory of the serving
host, cost against the budget and the last accepted run, MoE routing against uniform or a given
distribution; missing series are "not measurable", never a failure."""

from __future__ import annotations

from alerts.thresholds import Thresholds
from cost.prices import CostSettings
from infermeter.validate import Check, Result
from infermeter.validations import fleet_phase
from promql.sources import MemorySource
from store.types import SeriesKey

T0 = 1_800_000_000_000
MIN = 60_000
COST = CostSettings.model_validate({"budgets": [{"scope": "model", "model": "m", "cost_per_million_tokens": 5.0}]})


def _source(cost: float, shares: list[float] | None) -> MemorySource:
    src = MemorySource()
    stamps = [T0 + i * 15_000 for i in range(41)]
    src.add(SeriesKey.of("gpu_utilization_ratio", host="h1", gpu="0"), [(t, 0.82) for t in stamps])
    src.add(SeriesKey.of("gpu_utilization_ratio", host="other", gpu="0"), [(t, 0.05) for t in stamps])
    src.add(SeriesKey.of("gpu_memory_used_bytes", host="h1", gpu="0"), [(t, 60 * 2**30 + i) for i, t in enumerate(stamps)])
    src.add(SeriesKey.of("infermeter_cost_per_million_tokens_dollars", scope="model", model="m"), [(t, cost) for t in stamps])
    for e, share in enumerate(shares or []):
        src.add(SeriesKey.of("moe_expert_tokens_total", model="m", layer="0", expert=str(e)),
                [(t, 1000 + i * 400 * share) for i, t in enumerate(stamps)])
    return src


def _run(cost: float, shares: list[float] | None, baseline: dict | None = None,  # type: ignore[type-arg]
         expected: list[float] | None = None) -> dict[str, Check]:
    result = Result("http://h1:8000", "m", T0, T0 + 10 * MIN)
    fleet_phase(_source(cost, shares), result, ["h1"], Thresholds(), COST, baseline, expected)
    return {c.name: c for c in result.checks}


def test_a_healthy_run() -> None:
    checks = _run(4.0, [0.25, 0.25, 0.25, 0.25])
    assert checks["fleet: GPU utilization under load"].verdict == "pass"
    assert checks["fleet: GPU utilization under load"].measured == "82.0%"  # the serving host only
    assert checks["fleet: peak GPU memory"].measured == "60.0 GiB"
    assert checks["cost: per 1M tokens during the run"].verdict == "pass"
    assert checks["MoE: expert activation distribution"].verdict == "pass"


def test_cost_over_budget_and_over_the_last_accepted_run() -> None:
    assert _run(6.0, None)["cost: per 1M tokens during the run"].verdict == "fail"  # 5 + 15 % = 5.75
    baseline = {"checks": [{"name": "cost: per 1M tokens during the run", "measured": "$3.0000"}]}
    got = _run(4.0, None, baseline)["cost: per 1M tokens during the run"]
    assert got.verdict == "fail" and "previous accepted run $3.4500" in got.why
    assert _run(4.0, None)["MoE: expert activation distribution"].verdict == "not measurable"


def test_moe_against_uniform_and_an_expected_distribution() -> None:
    skewed = [0.55, 0.15, 0.15, 0.15]
    assert _run(4.0, skewed)["MoE: expert activation distribution"].verdict == "fail"
    matched = _run(4.0, skewed, expected=skewed)["MoE: expert activation distribution"]
    assert matched.verdict == "pass" and "from the expected distribution" in matched.goal
    wrong = _run(4.0, skewed, expected=[0.5, 0.5])["MoE: expert activation distribution"]
    assert wrong.verdict == "not measurable" and "2 experts" in wrong.why


def test_nothing_recorded_is_not_measurable() -> None:
    result = Result("http://h9:8000", "m", T0, T0 + 10 * MIN)
    fleet_phase(MemorySource(), result, ["h9"], Thresholds(), CostSettings(), None)
    assert {c.verdict for c in result.checks if c.name != "fleet: peak GPU memory"} == {"not measurable"}
    assert result.verdict == "pass"
