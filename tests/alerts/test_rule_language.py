"""The expression language and rule files: semantics and errors with file:line:column."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alerts.rulefile import RuleFileError, load_rule_text
from alerts.template import TemplateError, check_template, render
from promql import EvalContext, ExprError, Vector, parse
from promql.sources import MemorySource
from store.types import STALE_NAN, SeriesKey
from tests.alerts.rule_harness import T0


def _src() -> MemorySource:
    src = MemorySource()
    for g in range(4):
        src.add(SeriesKey.of("util", gpu=str(g), host="a" if g < 2 else "b"), [(T0 + s * 15_000, 0.2 * (g + 1)) for s in range(41)])
        src.add(SeriesKey.of("tok_total", gpu=str(g)), [(T0 + s * 15_000, s * 15.0 * (g + 1)) for s in range(41)])
    # a counter that resets half way
    src.add(SeriesKey.of("resetting_total"), [(T0 + s * 15_000, (s if s < 20 else s - 20) * 15.0) for s in range(41)])
    src.add(SeriesKey.of("gone"), [(T0, 1.0), (T0 + 15_000, STALE_NAN)])
    return src


def _eval(expr: str, at_s: int = 600) -> Vector | float:
    value = EvalContext(_src(), T0 + at_s * 1000).evaluate(parse(expr))
    assert not isinstance(value, str)
    return value


def _values(v: Vector | float) -> dict[str, float]:
    assert isinstance(v, Vector)
    return {",".join(f"{k}={x}" for k, x in lab): float(val) for lab, val in zip(v.labels, v.values)}


def test_rate_increase_and_resets() -> None:
    assert _values(_eval("rate(tok_total[5m])")) == pytest.approx({"gpu=0": 1.0, "gpu=1": 2.0, "gpu=2": 3.0, "gpu=3": 4.0})
    # 1/s with a reset at t=300 s (the 15 s before the drop to 0 are lost, as in Prometheus):
    # samples t=105..390 give 180 + 90 = 270 over 285 s, extrapolated to the 300 s window
    assert _values(_eval("increase(resetting_total[5m])", 400))[""] == pytest.approx(270 * 300 / 285)
    assert _values(_eval("resets(resetting_total[10m])"))[""] == 1


def test_aggregations_matching_and_group_ratio() -> None:
    assert _values(_eval("avg by (host) (util)")) == pytest.approx({"host=a": 0.3, "host=b": 0.7})
    assert _values(_eval("count without (gpu) (util > 0.3)")) == {"host=a": 1.0, "host=b": 2.0}
    ratios = _values(_eval('group_ratio(util, "host")'))
    assert ratios["gpu=0,host=a"] == pytest.approx(0.2 / 0.3)
    assert _values(_eval("max(util) - min(util)"))[""] == pytest.approx(0.6)
    assert _values(_eval("util > bool 0.5")) == {"gpu=0,host=a": 0.0, "gpu=1,host=a": 0.0, "gpu=2,host=b": 1.0, "gpu=3,host=b": 1.0}
    joined = _values(_eval("util * on(gpu) group_left rate(tok_total[5m])"))
    assert joined["gpu=3,host=b"] == pytest.approx(0.8 * 4)
    assert _values(_eval("topk(1, util)")) == {"__name__=util,gpu=3,host=b": pytest.approx(0.8)}
    assert _eval("scalar(sum(util)) * 2") == pytest.approx(4.0)


def test_stale_series_are_absent() -> None:
    assert _values(_eval("gone", 30)) == {}
    assert _values(_eval('absent(gone{job="x"})', 30)) == {"job=x": 1.0}


def test_histogram_quantile() -> None:
    src = MemorySource()
    for le, share in (("0.1", 0.5), ("0.2", 0.9), ("+Inf", 1.0)):
        src.add(SeriesKey.of("lat_bucket", le=le), [(T0 + s * 15_000, s * 100 * share) for s in range(21)])
    out = EvalContext(src, T0 + 300_000).evaluate(parse("histogram_quantile(0.7, rate(lat_bucket[5m]))"))
    assert isinstance(out, Vector) and out.values[0] == pytest.approx(0.15)


@pytest.mark.parametrize(
    ("expr", "message", "column"),
    [
        ("rate(x)", "must be a range", 6),
        ("sum(x", "expected ')'", 6),
        ('x{a="b"', "expected ',' or '}'", 8),
        ("nosuch(x)", "unknown function 'nosuch'", 1),
        ("x > ", "expected a number", 5),
        ("1 > 2", "needs the bool modifier", 3),
        ("x[5q]", "expected a duration", 3),
        ('x{a=~"("}', "bad regular expression", 6),
    ],
)
def test_parse_errors_name_the_column(expr: str, message: str, column: int) -> None:
    with pytest.raises(ExprError) as info:
        parse(expr)
    assert message in info.value.message
    assert info.value.line_col(expr) == (1, column)


def test_rule_file_errors_are_file_line_column() -> None:
    text = """groups:
  - name: g
    rules:
      - alert: A
        expr: rate(x) > 1
      - alert: B
        expr: |
          sum by (host) (
            up{job="a"
          )
      - alert: C
        expr: up == 0
        for: 5 minutes
      - record: r
        expr: up
        annotations: {a: b}
      - alert: D
        expr: up
        labels: {sev: "{{ $nope }}"}
      - alert: E
        expr: "up > "
        colour: red
"""
    with pytest.raises(RuleFileError) as info:
        load_rule_text(text, "rules.yml")
    problems = [str(p) for p in info.value.problems]
    assert "rules.yml:22:9: groups.0.rules.5.colour: Extra inputs are not permitted" in problems
    assert any(p.startswith("rules.yml:5:20: expr: argument 1 of rate() must be a range") for p in problems), problems
    assert any(p.startswith("rules.yml:10:11: expr: expected ',' or '}'") for p in problems), problems
    assert any(p.startswith("rules.yml:13:9:") and "for" in p for p in problems), problems
    assert any(p.startswith("rules.yml:14:") and "recording rules take no" in p for p in problems), problems
    assert any(p.startswith("rules.yml:19:") and "unsupported template" in p for p in problems), problems
    assert len(problems) == 6, problems


def test_templates() -> None:
    labels = {"host": "h1", "gpu": "3"}
    assert render("{{ $labels.host }}/{{ $labels.gpu }} {{ $value }}", labels, 0.5) == "h1/3 0.5"
    assert render("{{ $value | humanizePercentage }}", labels, 0.123) == "12.3%"
    assert render("{{ $value | humanizeDuration }}", labels, 3725.0) == "1h 2m 5s"
    assert render("{{ $value | humanize }}", labels, 1234567.0) == "1.235M"
    assert render('{{ printf "%.2f" $value }}', labels, math.pi) == "3.14"
    assert render("{{ $labels.missing }}x", labels, 1.0) == "x"


def test_template_conditionals() -> None:
    scope = "{{ if $labels.model }}model {{ $labels.model }}{{ else }}fleet{{ end }}: {{ printf \"%.0f\" $value }}"
    assert render(scope, {"model": "llama"}, 1.11004) == "model llama: 1"
    assert render(scope, {"model": ""}, 2.0) == "fleet: 2"
    assert render(scope, {}, 2.0) == "fleet: 2"
    nested = "{{ if $labels.a }}a{{ if $labels.b }}b{{ end }}{{ else }}-{{ end }}!"
    assert [render(nested, lab, 0.0) for lab in ({"a": "1", "b": "1"}, {"a": "1"}, {})] == ["ab!", "a!", "-!"]
    assert render("{{ if $value }}some{{ else }}none{{ end }}", {}, 0.0) == "none"
    for bad, message in (("{{ if $labels.a }}x", "without {{ end }}"), ("x{{ end }}", "without {{ if }}"),
                         ("{{ if $labels.a }}{{ else }}{{ else }}{{ end }}", "two {{ else }}"),
                         ("{{ if len $labels }}{{ end }}", "unsupported condition")):
        with pytest.raises(TemplateError, match=message):
            check_template(bad)


def test_vector_values_are_float64() -> None:
    v = _eval("util")
    assert isinstance(v, Vector) and v.values.dtype == np.float64
