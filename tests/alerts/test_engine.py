"""State machine transitions, persistence across restarts, health of failing rules, scaling."""

from __future__ import annotations

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, generate_latest

from alerts.engine import RuleEngine
from alerts.rulefile import load_rule_text
from alerts.scaling import ScaleAdvisor
from alerts.schema import alert_events
from alerts.state import FIRING, PENDING, RESOLVED, RuleState
from alerts.state_store import AlertStateStore
from promql.sources import MemorySource
from store.clock import ManualClock
from store.engine import create_store_engine
from store.types import SeriesKey
from tests.alerts.rule_harness import T0

RULES = """
groups:
  - name: g
    interval: 30s
    rules:
      - alert: Hot
        expr: temp > 80
        for: 10m
        keep_firing_for: 2m
        labels: {severity: warning, team: "{{ $labels.host }}-ops"}
        annotations:
          summary: "{{ $labels.host }} at {{ $value }} degrees"
      - alert: Broken
        expr: a / on(x) b
      - alert: Always
        expr: vector(1)
"""


def _temps(src: MemorySource, values: dict[int, float]) -> None:
    src.add(SeriesKey.of("temp", host="h1"), sorted((T0 + s * 1000, v) for s, v in values.items()))


def test_transitions_inactive_pending_firing_resolved() -> None:
    state = RuleState(for_ms=60_000, keep_firing_for_ms=0, resolved_retention_ms=120_000)
    labels, ann = {"alertname": "X"}, {}
    steps = [
        (0, True, PENDING), (30_000, True, PENDING), (60_000, True, FIRING),
        (90_000, False, RESOLVED), (150_000, False, RESOLVED), (210_000, False, None),
    ]
    for at, present, expect in steps:
        state.step(T0 + at, [(labels, ann, 1.0)] if present else [])
        got = next(iter(state.instances.values())).state if state.instances else None
        assert got == expect, at
    # pending that clears goes back to inactive without firing
    state.step(T0 + 300_000, [(labels, ann, 1.0)])
    changes = state.step(T0 + 330_000, [])
    assert [c.to_state for c in changes] == ["inactive"] and not state.instances


def test_for_survives_restart_and_history_is_kept(sqlite_url: str) -> None:
    engine_db = create_store_engine(sqlite_url)
    groups = load_rule_text(RULES, "rules.yml")
    src = MemorySource()
    _temps(src, {s: 90.0 for s in range(0, 1200, 15)})
    clock = ManualClock(T0)
    first = RuleEngine(groups, src, clock, CollectorRegistry(), state_store=AlertStateStore(engine_db))
    for s in range(0, 361, 30):  # six minutes pending
        first.evaluate_group(groups[0], T0 + s * 1000)
    assert [i.state for r, i in first.active() if r.name == "Hot"] == [PENDING]
    # "restart": a new engine on the same database
    second = RuleEngine(groups, src, clock, CollectorRegistry(), state_store=AlertStateStore(engine_db))
    fired_at = None
    for s in range(390, 900, 30):
        second.evaluate_group(groups[0], T0 + s * 1000)
        if any(r.name == "Hot" and i.state == FIRING for r, i in second.active()):
            fired_at = s
            break
    assert fired_at == 600  # minute 10, not minute 16
    hot = next(i for r, i in second.active() if r.name == "Hot")
    assert hot.labels["team"] == "h1-ops" and hot.annotations["summary"] == "h1 at 90 degrees"
    with engine_db.connect() as conn:
        rows = [r for r in conn.execute(sa.select(alert_events).order_by(alert_events.c.id)) if r.rule_key == "g/Hot"]
    assert [(r.from_state, r.to_state) for r in rows] == [("inactive", "pending"), ("pending", "firing")]
    assert '"summary": "h1 at 90 degrees"' in rows[-1].annotations  # history keeps the annotations
    engine_db.dispose()


def test_keep_firing_for_and_failing_rule_isolated() -> None:
    groups = load_rule_text(RULES, "rules.yml")
    src = MemorySource()
    _temps(src, {s: (90.0 if s < 660 else 20.0) for s in range(0, 1200, 15)})
    for key in (SeriesKey.of("a", x="1", y="1"), SeriesKey.of("a", x="1", y="2"), SeriesKey.of("b", x="1")):
        src.add(key, [(T0 + s * 1000, 1.0) for s in range(0, 1200, 15)])
    registry = CollectorRegistry()
    sent: list[list[str]] = []
    engine = RuleEngine(groups, src, ManualClock(T0), registry, sink=lambda alerts: sent.append([a.status for a in alerts]))
    states = {}
    for s in range(0, 1000, 30):
        engine.evaluate_group(groups[0], T0 + s * 1000)
        states[s] = next((i.state for r, i in engine.active() if r.name == "Hot"), None)
    assert states[630] == FIRING and states[660] == FIRING  # condition clears at 660 ...
    assert states[750] == FIRING  # ... kept firing for 2 min ...
    assert states[780] == RESOLVED  # ... then resolved
    assert engine.health["g/Broken"].health == "err" and "group_left" in engine.health["g/Broken"].last_error
    assert engine.health["g/Always"].health == "ok"  # a failing rule does not stop the others
    assert any(r.name == "Always" and i.state == FIRING for r, i in engine.active())
    assert ["resolved"] in [s for s in sent if "resolved" in s] or any("resolved" in s for s in sent)
    text = generate_latest(registry).decode()
    assert 'infermeter_rule_evaluation_failures_total{group="g",rule="Broken"}' in text
    assert "infermeter_rule_group_last_duration_seconds" in text


def test_scale_advisor_cooldown_and_bounds(sqlite_url: str) -> None:
    db = create_store_engine(sqlite_url)
    groups = load_rule_text(
        """
groups:
  - name: q
    rules:
      - alert: QueueBacklog
        expr: sum by (model) (waiting) > 1000
        labels: {action: add_instance}
""", "q.yml")
    src = MemorySource()
    src.add(SeriesKey.of("waiting", model="m", instance="a"), [(T0 + s * 1000, 5000.0) for s in range(0, 4000, 15)])
    advisor = ScaleAdvisor(300_000, 2, 4, lambda scope, at: 2, CollectorRegistry(), db)
    engine = RuleEngine(groups, src, ManualClock(T0), CollectorRegistry(), observers=[advisor.observe])
    for s in range(0, 3600, 30):
        engine.evaluate_group(groups[0], T0 + s * 1000)
    events = [(e.at_ms - T0, e.from_instances, e.to_instances) for e in advisor.events]
    # one per 300 s cooldown, and never past the upper bound of 4
    assert events == [(0, 2, 3), (300_000, 3, 4)]
    restored = ScaleAdvisor(300_000, 2, 4, lambda scope, at: 2, CollectorRegistry(), db)
    assert restored.recommended == {"m": 4} and restored.last_event("m") is not None
    db.dispose()


def test_cost_spike_checks_for_a_model() -> None:
    """The enricher attaches the three checks of seed 000 §4.2 for a model-scoped alert."""
    from alerts.cost_spike import CostSpikeChecks

    src = MemorySource()
    day = 86_400
    for s in range(0, day + 3600, 60):
        t = T0 + s * 1000
        util = 0.8 if s < day else 0.4
        src.add(SeriesKey.of("gpu_utilization_ratio", host="n1", gpu="0"), [(t, util)])
        src.add(SeriesKey.of("inference_prompt_tokens_total", model="m"), [(t, s * (10.0 if s < day else 30.0))])
        src.add(SeriesKey.of("inference_generation_tokens_total", model="m"), [(t, s * 5.0)])
        src.add(SeriesKey.of("inference_requests_total", model="m", outcome="success"), [(t, s * 0.1)])
    advisor = ScaleAdvisor(300_000, 2, 16, lambda scope, at: 2, CollectorRegistry())
    checks = CostSpikeChecks(src, advisor, lambda scope, at: 2)({"model": "m", "alertname": "CostPerTokenSpike"}, T0 + (day + 3600) * 1000)
    assert "40%" in checks["check_utilization"] and "utilization fell" in checks["check_utilization"]
    assert checks["check_request_mix"].startswith("prompt tokens/request")
    assert "+" in checks["check_request_mix"]  # prompts got longer
    assert checks["check_autoscaling"] == "no scale recommendation on record for this scope"
    assert "check_release" not in checks  # no markers kept: nothing said about releases


def test_cost_spike_names_the_nearest_change_before(sqlite_url: str) -> None:
    from alerts.cost_spike import CostSpikeChecks
    from releases.markers import MarkerStore
    from store import ManualClock

    db = create_store_engine(sqlite_url)
    markers = MarkerStore(db, ManualClock(T0))
    markers.add("deploy", model="other", version="v9", at_ms=T0 - 600_000)
    markers.add("deploy", model="m", version="v2", at_ms=T0 - 2 * 3_600_000)
    fleet = markers.add("config", message="max_batch_size 64", at_ms=T0 - 3_600_000)
    check = CostSpikeChecks(MemorySource(), None, lambda scope, at: 1, markers.nearest_before)
    text = check({"model": "m", "alertname": "CostPerTokenSpike"}, T0)["check_release"]
    assert text.startswith("nearest change before: config all models: max_batch_size 64 (60 min before)")
    assert f"infermeter compare --marker {fleet.id}" in text
    assert check({"alertname": "CostPerTokenSpike"}, T0)["check_release"].startswith(
        "nearest change before: deploy other v9 (10 min before)")  # a fleet-wide alert: every model's markers count
    assert check({"model": "m", "alertname": "x"}, T0 - 3 * 3_600_000)["check_release"] == \
        "no deploy or config change recorded in the 24 h before"
    db.dispose()


def test_state_rows_follow_transitions_only(sqlite_url: str) -> None:
    """Steady alerts cost no writes; a resolved alert's row goes once its retention has passed."""
    from alerts.schema import alert_state

    db = create_store_engine(sqlite_url)
    groups = load_rule_text("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x > 1\n", "r.yml")
    src = MemorySource()
    for i in range(50):
        src.add(SeriesKey.of("x", i=str(i)), [(T0 + s * 1000, 5.0 if (i or s < 600) else 0.0) for s in range(0, 3000, 15)])
    store = AlertStateStore(db)
    writes: list[int] = []
    original = store.save
    store.save = lambda *a: (writes.append(len(a[2])), original(*a))[1]  # type: ignore[method-assign]
    engine = RuleEngine(groups, src, ManualClock(T0), CollectorRegistry(), state_store=store)
    for s in range(0, 2700, 30):
        engine.evaluate_group(groups[0], T0 + s * 1000)
    # one write when 50 alerts went pending and firing (100 transitions), one when series 0
    # resolved, one when its row was dropped after the retention; nothing for steady cycles
    assert writes == [100, 1, 0]
    with db.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(alert_state)).scalar_one() == 49
    db.dispose()
