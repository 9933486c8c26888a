"""Range queries evaluate every step at once (promql.matrix_eval); they must answer exactly what
the instant-query evaluator answers at each step. The conformance corpus runs both ways over
data rougher than the Prometheus comparison's: jittered scrapes, staleness markers, a series
that comes back after going stale, NaN samples, counters that restart or first appear at a
non-zero value, and label sets that collide after ``label_replace`` at different steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from promql.evaluate import EvalContext
from promql.lexer import ExprError
from promql.parser import parse
from promql.range_query import PreloadedSource, evaluate_range
from promql.sources import MemorySource
from promql.vector import Labels, Vector
from store.types import STALE_NAN, SeriesKey
from tests.promql import conformance_data
from tests.promql.corpus import corpus

T0 = 1_700_000_000_000
MIN = 60_000


def _rough_source() -> MemorySource:
    source = MemorySource()
    for key, ts, values in conformance_data.series(T0):
        source.add(key, zip(ts.tolist(), values.tolist()))
    rng = np.random.default_rng(5)
    n = 2 * 3600 // 15
    jitter = T0 + np.arange(n, dtype=np.int64) * 15_000 + rng.integers(-900, 900, n)
    flaky = np.round(rng.random(n) * 100, 1)
    flaky[::37] = np.nan  # an exporter that sometimes reports NaN
    source.add(SeriesKey.of("demo_flaky", job="node", instance="10.0.0.9:9100"), zip(jitter.tolist(), flaky.tolist()))
    # stale at 30 min (marker), back at 50 min with a counter restarted from a non-zero value
    gone = [(T0 + k * 15_000, float(k * 3)) for k in range(120)] + [(T0 + 120 * 15_000, STALE_NAN)]
    back = [(T0 + 50 * MIN + k * 15_000, 40.0 + k * 2) for k in range(200)]
    source.add(SeriesKey.of("demo_flaky_total", job="node", instance="10.0.0.9:9100"), gone + back)
    # series whose rewritten labels collide: a (marked stale at 50 min) and b (from 52 min)
    # never at the same step, b and c (from 60 min) at once
    source.add(SeriesKey.of("demo_shift", slot="a"), [(T0 + k * 15_000, 1.0) for k in range(200)] + [(T0 + 50 * MIN, STALE_NAN)])
    source.add(SeriesKey.of("demo_shift", slot="b"), [(T0 + 52 * MIN + k * 15_000, 2.0) for k in range(100)])
    source.add(SeriesKey.of("demo_shift", slot="c"), [(T0 + 60 * MIN + k * 15_000, 3.0) for k in range(100)])
    return source


EXTRA = [
    "demo_flaky", "rate(demo_flaky_total[5m])", "increase(demo_flaky_total[2m])", "irate(demo_flaky_total[1m])",
    "resets(demo_flaky_total[30m])", "changes(demo_flaky[5m])", "max_over_time(demo_flaky[3m])",
    "min_over_time(demo_flaky[3m])", "sum_over_time(demo_flaky[2m])", "avg_over_time(demo_flaky[45s])",
    "count_over_time(demo_flaky_total[10m])", "last_over_time(demo_flaky_total[2m])", "demo_flaky_total",
    "timestamp(demo_flaky_total)", "absent(demo_flaky_total)", "absent_over_time(demo_flaky_total[1m])",
    "stddev_over_time(demo_flaky[5m])", "quantile_over_time(0.25, demo_flaky[5m])", "deriv(demo_flaky_total[5m])",
    'label_replace(demo_shift, "slot", "", "slot", ".*")', 'sum(label_replace(demo_shift, "slot", "x", "", ""))',
    "demo_shift or demo_flaky", "demo_flaky_total > 50", "demo_flaky_total > bool 50", "demo_flaky > demo_flaky_total",
    "demo_shift{slot=\"a\"} + on() group_left demo_shift{slot=\"b\"}", "topk(1, demo_shift)",
    "max_over_time(rate(demo_flaky_total[2m])[7m:45s])", "rate(demo_flaky_total[5m:20s] offset 3m)",
    "scalar(demo_shift)", "vector(scalar(demo_shift)) * 2", "quantile(0.5, demo_flaky)", "count(demo_shift) by (slot)",
    "round(demo_flaky, 3)", "clamp(demo_flaky, 20, scalar(demo_shift) * 30)", "sort_desc(demo_flaky)",
    'count_values("v", demo_shift)', "stddev(demo_temperature_celsius)", "demo_flaky_total @ 1700002400",
    "predict_linear(demo_flaky_total[10m], 60)", "holt_winters(demo_flaky[5m], 0.3, 0.6)",
]


def _stepwise(expr: str, source: MemorySource, start: int, end: int, step: int) -> dict[Labels, list[tuple[int, float]]]:
    """The reference: the instant evaluator at every step, points gathered by label set."""
    node = parse(expr)
    preloaded = PreloadedSource(source, end - start, step)
    base = EvalContext(preloaded, start, start_ms=start, end_ms=end)
    points: dict[Labels, list[tuple[int, float]]] = {}
    for t in range(start, end + 1, step):
        value = base.at(t).evaluate(node)
        if isinstance(value, Vector):
            if len(set(value.labels)) != len(value.labels):
                raise ExprError("vector cannot contain metrics with the same labelset", 0)
            for labels, v in zip(value.labels, value.values.tolist()):
                points.setdefault(labels, []).append((t, v))
        else:
            points.setdefault((), []).append((t, float(value)))
    return points


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


WINDOWS = [(T0 + 10 * MIN, T0 + 59 * MIN, 60_000), (T0 + 10 * MIN, T0 + 110 * MIN, 60_000), (T0, T0 + 2 * 3600_000, 37_000), (T0 + 29 * MIN, T0 + 31 * MIN, 15_000)]


@pytest.fixture(scope="module")
def source() -> MemorySource:
    return _rough_source()


@pytest.mark.parametrize("expr", corpus() + EXTRA)
def test_a_range_query_answers_what_every_step_answers_alone(expr: str, source: MemorySource) -> None:
    for start, end, step in WINDOWS:
        try:
            expected = _stepwise(expr, source, start, end, step)
        except ExprError as exc:
            with pytest.raises(ExprError):
                evaluate_range(parse(expr), source, start, end, step)
            assert exc.message
            continue
        got = {s.labels: list(zip(s.ts_ms.tolist(), s.values.tolist())) for s in evaluate_range(parse(expr), source, start, end, step)}
        assert set(got) == set(expected), f"{expr} @ {start},{end},{step}: label sets differ"
        for labels, points in expected.items():
            mine = got[labels]
            assert [t for t, _ in mine] == [t for t, _ in points], f"{expr} {labels}: steps differ"
            bad = [(t, a, b) for (t, a), (_, b) in zip(mine, points) if not _same(a, b)]
            assert not bad, f"{expr} {labels}: {bad[:3]}"


def test_the_collision_case_really_collides_and_the_guard_sees_it(source: MemorySource) -> None:
    """Relabelled series present at separate steps merge into one; two present at one step
    make the range query refuse, as Prometheus does."""
    node = parse('label_replace(demo_shift, "slot", "", "slot", ".*")')
    merged = evaluate_range(node, source, T0 + 10 * MIN, T0 + 59 * MIN, MIN)
    assert len(merged) == 1 and len(merged[0].ts_ms) == 40 + 8  # a at 10..49 min (its marker at 50), b at 52..59
    assert set(merged[0].values.tolist()) == {1.0, 2.0}
    with pytest.raises(ExprError, match="same labelset"):
        evaluate_range(node, source, T0 + 55 * MIN, T0 + 70 * MIN, MIN)
