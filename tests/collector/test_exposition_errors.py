"""collector.exposition.parser on invalid input: ParseError names the line, the reason and an excerpt."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.exposition import ParseError
from tests.collector.fixtures import parse

# --- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        ("a 1\nb{x=\"y\"} 1.2.3\n", 2, "invalid value"),
        ("a 1\nb zero\n", 2, "invalid value"),
        ("a 1\nb 1_000\n", 2, "invalid value"),
        ("a 1\n\nb{x=\"y} 1\n", 3, "unterminated label value"),
        ("a 1\nb{x=\"y\\q\"} 1\n", 2, "invalid escape sequence"),
        ("# HELP a x\na 1\n1bad 1\n", 3, "invalid metric name"),
        ("a 1\nb-c 1\n", 2, "invalid metric name"),
        ("a 1\nb{x=\"1\",y=\"2\",x=\"3\"} 1\n", 2, "duplicate label name 'x'"),
        ("a 1\nb{x=\"1\"\n", 2, "unterminated label set"),
        ("a 1\nb{x=\"1\",\n", 2, "unterminated label set"),
        ("a 1\nb{x=\"}\",\n", 2, "unterminated label set"),
        ("a 1\nb{1x=\"1\"} 1\n", 2, "invalid label name"),
        ("a 1\nb{x=1} 1\n", 2, "expected '=\"'"),
        ("a 1\nb{x=\"1\" y=\"2\"} 1\n", 2, "expected ',' or '}'"),
        ("a 1\nb{,} 1\n", 2, "invalid label name"),
        ("a 1\nb\n", 2, "missing value"),
        ("a 1\nb{} \n", 2, "missing value"),
        ("a 1\nb{}1\n", 2, "expected blank before value"),
        ("a 1\nb 1 12.5\n", 2, "invalid timestamp"),
        ("a 1\nb 1 2 3\n", 2, "unexpected text"),
        ("a 1\n# TYPE b countre\n", 2, "unknown metric type"),
        ("a 1\n# TYPE b\n", 2, "missing metric type"),
        ("# HELP 9x nope\n", 1, "invalid metric name"),
    ],
)
def test_error_names_line_and_reason(body: str, line: int, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(body)
    err = info.value
    assert err.line == line
    assert reason in err.reason
    assert err.excerpt == body.split("\n")[line - 1]
    assert str(err) == f"line {err.line}: {err.reason}: {err.excerpt!r}"


def test_openmetrics_eof_errors() -> None:
    with pytest.raises(ParseError) as missing:
        parse("a_total 1\nb 2\n", openmetrics=True)
    assert missing.value.line == 3 and "missing '# EOF'" in missing.value.reason
    with pytest.raises(ParseError) as after:
        parse("a 1\n# EOF\n\nb 2\n")
    assert after.value.line == 4 and after.value.reason == "content after # EOF"
    assert len(parse("a 1\n# EOF\n\n  \n").batch) == 1
    with pytest.raises(ParseError) as bad_exemplar:
        parse('a_total 1 # trace_id="x" 1\n# EOF\n')
    assert bad_exemplar.value.line == 1 and "exemplar" in bad_exemplar.value.reason
    with pytest.raises(ParseError, match="invalid timestamp"):
        parse("a 1 NaN\n# EOF\n")


def test_invalid_utf8_names_line() -> None:
    body = b'a 1\nb 2\nc{x="\xff\xfe"} 3\n'
    with pytest.raises(ParseError) as info:
        parse(body)
    assert info.value.line == 3 and info.value.reason == "invalid UTF-8"
    assert info.value.excerpt.startswith('c{x="')


def test_error_excerpt_truncated_and_pickles() -> None:
    body = "m{" + ",".join(f'l{i}="{i}"' for i in range(60)) + "} oops\n"
    with pytest.raises(ParseError) as info:
        parse(body)
    assert len(info.value.excerpt) <= 120
    clone = pickle.loads(pickle.dumps(info.value))
    assert (clone.line, clone.reason, clone.excerpt, str(clone)) == (
        info.value.line, info.value.reason, info.value.excerpt, str(info.value))
    assert isinstance(info.value, ValueError)


# --- property: never anything but ParseError ----------------------------------------------

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_random_input_parses_or_raises_parse_error(body: str | bytes) -> None:
    try:
        res = parse(body)
    except ParseError:
        return
    assert len(res.batch.keys) <= len(res.batch)
