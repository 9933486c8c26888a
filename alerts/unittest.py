"""``infermeter rules test``: unit tests for rules in promtool's format (the same files run under
``promtool test rules``): ``input_series`` in expanding notation (``0+10x100``, ``1x5``, ``_``,
``stale``), ``alert_rule_test`` with ``exp_alerts``, and ``promql_expr_test`` with ``exp_samples``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from alerts.engine import RuleEngine
from alerts.rulefile import RuleGroup, load_rule_file
from alerts.state import FIRING
from promql import EvalContext, Vector, parse
from promql.ast import VectorSelector
from promql.lexer import ExprError, duration_ms
from promql.sources import MemorySource
from store.clock import ManualClock
from store.types import STALE_NAN, SeriesKey

T0 = 0  # promtool's tests start at Unix time 0


@dataclass
class TestFailure:
    test: int
    kind: str
    at: str
    message: str

    def __str__(self) -> str:
        return f"test {self.test}, {self.kind} at {self.at}: {self.message}"


def expand_values(text: str) -> list[float | None]:
    """promtool's expanding notation; None is a missing sample."""
    out: list[float | None] = []
    for token in str(text).split():
        if token == "_":
            out.append(None)
        elif token == "stale":
            out.append(STALE_NAN)
        elif "x" in token:
            head, count_text = token.rsplit("x", 1)
            count = int(count_text)
            if head == "_":
                out.extend([None] * count)
                continue
            start_text, step = head, 0.0
            for sign in ("+", "-"):
                idx = head.find(sign, 1)
                if idx > 0:
                    start_text, step = head[:idx], float(head[idx + 1 :]) * (1 if sign == "+" else -1)
                    break
            start = float(start_text)
            # `a+bxn` yields n+1 samples; `axn` (no step) yields n+1 as well, as promtool does
            out.extend(start + i * step for i in range(count + 1))
        else:
            out.append(float(token))
    return out


def _series_key(text: str) -> SeriesKey:
    node = parse(text)
    if not isinstance(node, VectorSelector) or node.name is None or any(m.op != "=" for m in node.matchers):
        raise ExprError(f"input series must be metric{{label=\"value\", ...}}, got {text!r}", 0)
    return SeriesKey.of(node.name, {m.label: m.value for m in node.matchers})


def _sample_labels(text: str | None) -> str:
    if not text or text.strip() == "{}":
        return "{}"
    node = parse(text)
    assert isinstance(node, VectorSelector)
    labels = {m.label: m.value for m in node.matchers}
    if node.name:
        labels["__name__"] = node.name
    return _labels_text(labels)


def _labels_text(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def run_test_file(path: str | Path) -> list[TestFailure]:
    path = Path(path)
    spec: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    groups: list[RuleGroup] = []
    for rule_file in spec.get("rule_files", []):
        groups.extend(load_rule_file(path.parent / rule_file))
    default_eval = duration_ms(str(spec.get("evaluation_interval", "1m")))
    failures: list[TestFailure] = []
    for n, test in enumerate(spec.get("tests", []), 1):
        failures.extend(_run_one(n, test, groups, default_eval))
    return failures


def _run_one(n: int, test: dict[str, Any], groups: list[RuleGroup], eval_ms: int) -> list[TestFailure]:
    interval = duration_ms(str(test.get("interval", "1m")))
    src = MemorySource()
    for item in test.get("input_series", []):
        key = _series_key(item["series"])
        samples = [(T0 + i * interval, v) for i, v in enumerate(expand_values(item.get("values", ""))) if v is not None]
        src.add(key, samples)
    failures: list[TestFailure] = []
    alert_tests = sorted(test.get("alert_rule_test", []), key=lambda t: duration_ms(str(t["eval_time"])))
    if alert_tests:
        clock = ManualClock(T0)
        engine = RuleEngine(groups, src, clock, CollectorRegistry())
        last = duration_ms(str(alert_tests[-1]["eval_time"]))
        pending = list(alert_tests)
        t = 0
        while pending:
            # A check at eval_time sees the state of the last evaluation at or before it.
            while pending and duration_ms(str(pending[0]["eval_time"])) < t:
                failures.extend(_check_alerts(n, pending.pop(0), engine))
            if t <= last:
                for group in groups:
                    if t % (group.interval_ms or eval_ms) == 0:
                        engine.evaluate_group(group, T0 + t)
            while pending and duration_ms(str(pending[0]["eval_time"])) == t:
                failures.extend(_check_alerts(n, pending.pop(0), engine))
            t += eval_ms
    for check in test.get("promql_expr_test", []):
        at = duration_ms(str(check["eval_time"]))
        got = EvalContext(src, T0 + at).evaluate(parse(check["expr"]))
        actual = sorted(
            (_labels_text(lab), round(val, 9))
            for lab, val in (got.as_dicts() if isinstance(got, Vector) else [({}, float(got))])
        )
        expected = sorted((_sample_labels(s.get("labels")), round(float(s["value"]), 9)) for s in check.get("exp_samples", []))
        actual_cmp = [(a, v) for a, v in actual if not math.isnan(v)]
        if actual_cmp != expected:
            failures.append(TestFailure(n, f"expr {check['expr']!r}", str(check["eval_time"]), f"expected {expected}, got {actual_cmp}"))
    return failures


def _check_alerts(n: int, check: dict[str, Any], engine: RuleEngine) -> list[TestFailure]:
    name = check["alertname"]
    got = sorted(
        (_labels_text({k: v for k, v in inst.labels.items() if k != "alertname"}), _labels_text(inst.annotations))
        for rule, inst in engine.active()
        if rule.name == name and inst.state == FIRING
    )
    want = sorted(
        (_labels_text({str(k): str(v) for k, v in (a.get("exp_labels") or {}).items()}),
         _labels_text({str(k): str(v) for k, v in (a.get("exp_annotations") or {}).items()}))
        for a in check.get("exp_alerts") or []
    )
    if got != want:
        return [TestFailure(n, f"alert {name}", str(check["eval_time"]), f"expected {want}, got {got}")]
    return []
