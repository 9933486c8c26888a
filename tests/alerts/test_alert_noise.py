"""The default pack replayed over a day of bursty GPU duty cycles pages a pod a few times at
most, and still reports the idle stretches that matter.

Real clusters do not idle cleanly: a pod serves for a quarter of an hour, idles for half an
hour, serves again; an idle GPU shows a health check's blip now and then; light traffic leaves
one request running every other minute. The day below is generated (seeded) in that shape:
idle and busy stretches with lognormal lengths (idle median 25 min, busy median 15 min), busy
levels that differ per stretch, 2 % of idle samples blipping to 5-20 %, a night when most pods
idle for hours, and a few pods that stay busy all day.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from alerts.defaults import default_rule_groups
from alerts.engine import RuleEngine
from alerts.rulefile import RuleGroup, load_rule_text
from promql.sources import MemorySource
from store.clock import ManualClock
from store.types import SeriesKey

T0 = 1_800_000_000_000
STEP_S = 15
DAY_S = 86_400
PODS = 24
NOISY = ("GpuIdle", "QueueIdle", "FleetUtilizationLow", "GpuLoadImbalance")


def _duty_cycle(rng: np.random.Generator, kind: str) -> np.ndarray:
    n = DAY_S // STEP_S
    hours = np.arange(n) * STEP_S / 3600
    util = np.zeros(n)
    t = 0
    busy = bool(rng.integers(2))
    while t < n:
        night = 1 <= hours[t] % 24 < 7
        if kind == "steady":
            length, level = n, rng.uniform(0.6, 0.9)
        elif busy:
            length, level = rng.lognormal(np.log(15 * 60), 0.8), rng.uniform(0.3, 0.95)
        else:
            median = 3 * 3600 if night else 25 * 60
            length, level = rng.lognormal(np.log(median), 1.0), 0.0
        steps = max(1, int(length / STEP_S))
        util[t : t + steps] = level
        t += steps
        busy = not busy
    noise = rng.normal(0, 0.05, n)
    util = np.where(util > 0, np.clip(util + noise, 0.05, 1.0), 0.0)
    blips = (util == 0) & (rng.random(n) < 0.02)
    util[blips] = rng.uniform(0.05, 0.2, blips.sum())
    return util


def _day(seed: int) -> MemorySource:
    rng = np.random.default_rng(seed)
    src = MemorySource()
    stamps = T0 + np.arange(DAY_S // STEP_S, dtype=np.int64) * STEP_S * 1000
    for pod in range(PODS):
        util = _duty_cycle(rng, "steady" if pod % 8 == 0 else "bursty")
        gpu = SeriesKey.of("gpu_utilization_ratio", host=f"pod-{pod:03d}", gpu="0", gpu_model="NVIDIA A100-SXM4-80GB")
        src.add(gpu, zip(stamps.tolist(), util.tolist()))
        # light traffic: a request runs in about half of the busy samples, none while idle
        running = (util > 0.25) & (rng.random(len(util)) < 0.5)
        labels = {"model": f"model-{pod:03d}", "instance": f"pod-{pod:03d}:8000"}
        src.add(SeriesKey.of("inference_requests_running", **labels), zip(stamps.tolist(), running.astype(float).tolist()))
        src.add(SeriesKey.of("inference_requests_waiting", **labels), zip(stamps.tolist(), [0.0] * len(util)))
    return src


def _replay(groups: list[RuleGroup], src: MemorySource, every_s: int = 60) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    """Firing transitions per (alert, pod), and pending <-> inactive flips per alert."""
    clock = ManualClock(T0)
    engine = RuleEngine(groups, src, clock, CollectorRegistry())
    fired: Counter[tuple[str, str]] = Counter()
    flips: Counter[str] = Counter()
    for at in range(T0, T0 + DAY_S * 1000, every_s * 1000):
        clock.set(at)
        for group in groups:
            for tr in engine.evaluate_group(group, at):
                name = tr.labels.get("alertname", "")
                pod = tr.labels.get("host") or tr.labels.get("model", "").replace("model", "pod") or "fleet"
                if tr.to_state == "firing":
                    fired[(name, pod)] += 1
                elif {tr.from_state, tr.to_state} == {"pending", "inactive"}:
                    flips[name] += 1
    return fired, flips


def _noisy_rules() -> list[RuleGroup]:
    return [
        RuleGroup(g.name, g.interval_ms, tuple(r for r in g.rules if r.name in NOISY), g.file)
        for g in default_rule_groups()
        if any(r.name in NOISY for r in g.rules)
    ]


@pytest.fixture(scope="module")
def day() -> MemorySource:
    return _day(seed=7)


def test_naive_rules_flap_on_this_day(day: MemorySource) -> None:
    """The yardstick: the plain `for` rules page bursty pods again and again on this day,
    so the test below measures something."""
    naive = load_rule_text(
        "groups:\n  - name: naive\n    rules:\n"
        "      - alert: GpuIdle\n        expr: gpu_utilization_ratio < 0.05\n        for: 30m\n"
        "      - alert: QueueIdle\n        expr: sum by (model) (inference_requests_waiting + inference_requests_running) < 1\n"
        "        for: 30m\n",
        "naive.yml",
    )
    fired, flips = _replay(naive, day)
    per_pod = [n for (name, _), n in fired.items() if name == "GpuIdle"]
    assert max(per_pod) >= 6
    assert flips["QueueIdle"] > 500


def test_default_pack_pages_each_pod_a_few_times_a_day(day: MemorySource) -> None:
    fired, flips = _replay(_noisy_rules(), day)
    per_pod: Counter[str] = Counter()
    for (name, pod), n in fired.items():
        assert n <= 3, f"{name} fired {n} times on {pod} in a day"
        per_pod[pod] += n
    assert max(per_pod.values()) <= 4, per_pod.most_common(3)
    assert flips["QueueIdle"] < 100 and flips["GpuIdle"] < 200, flips
    # ... and it still says what is worth saying: the bursty pods idle through the night
    idle_pods = {pod for (name, pod) in fired if name == "GpuIdle"}
    bursty = {f"pod-{p:03d}" for p in range(PODS) if p % 8}
    steady = {f"pod-{p:03d}" for p in range(PODS) if p % 8 == 0}
    assert len(idle_pods & bursty) >= len(bursty) * 3 // 4
    assert not idle_pods & steady
