"""collector.exposition.parser on valid input: syntax, metadata, and agreement with prometheus_client.

Covers Prometheus text 0.0.4 and OpenMetrics 1.0 bodies, the fixtures in the shapes of the real
exporters and captured files, and a property test that rendered samples round-trip.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from collector.exposition import FamilyMeta, SeriesCache, is_openmetrics_content_type
from store.types import SeriesKey
from tests.collector.fixtures import DCGM, OPENMETRICS, TGI, TRITON, TS, VLLM, Triple, _v, parse, triples

CAPTURED = [
    "/work/shared/reference/samples/vllm_v1_metrics_partial_capture.txt",
    "/work/shared/reference/samples/vllm_metrics_datadog_fixture.txt",
    "/work/shared/reference/samples/dcgm_exporter_metrics_excerpt.txt",
    "/work/shared/reference/samples/triton_trtllm_metrics_readme.txt",
    "/work/shared/reference/samples/nccl_inspector_prom_readme_examples.prom",
    "/work/shared/data/captured/dcgm_exporter_metrics_upcloud_L40S.prom",
]


def client_triples(text: str) -> set[Triple]:
    """prometheus_client's samples, undoing its renaming of 0.0.4 counters to *_total."""
    out: set[Triple] = set()
    for fam in text_string_to_metric_families(text):
        declared = re.search(rf"^# TYPE {re.escape(fam.name)} counter$", text, re.M) is not None
        for s in fam.samples:
            name = fam.name if fam.type == "counter" and declared and s.name == fam.name + "_total" else s.name
            out.add((name, tuple(sorted(s.labels.items())), _v(s.value)))
    return out


# --- syntax -----------------------------------------------------------------------------------

def test_basic_samples_keys_values_and_default_timestamp() -> None:
    res = parse('up 1\nhttp_requests_total{method="post",code="200"} 1027\n')
    assert res.batch.keys == [SeriesKey("up"), SeriesKey.of("http_requests_total", method="post", code="200")]
    assert res.batch.values.tolist() == [1.0, 1027.0]
    assert res.batch.ts_ms.tolist() == [TS, TS]
    assert res.batch.key_index.tolist() == [0, 1]
    assert res.batch.values.dtype == np.float64 and res.batch.ts_ms.dtype == np.int64
    assert not res.openmetrics and res.skipped_samples == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NaN", math.nan), ("+Inf", math.inf), ("-Inf", -math.inf), ("Inf", math.inf),
        ("0", 0.0), ("-17", -17.0), ("3.25", 3.25), ("1e3", 1000.0), ("-1.5E-3", -0.0015),
        ("1.7769301736864982e+09", 1.7769301736864982e09), (".5", 0.5), ("+7", 7.0),
    ],
)
def test_value_forms(text: str, expected: float) -> None:
    for body in (f"m {text}\n", f'm{{a="b"}} {text}\n'):
        got = float(parse(body).batch.values[0])
        assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_label_escapes_and_special_characters() -> None:
    body = 'm{a="back\\\\slash",b="quote\\"d",c="new\\nline",d="} , = # {x}",e=""} 1\n'
    key = parse(body).batch.keys[0]
    assert key.labels_dict() == {"a": "back\\slash", "b": 'quote"d', "c": "new\nline", "d": "} , = # {x}", "e": ""}


def test_empty_label_set_trailing_comma_blanks_and_order() -> None:
    body = 'a{} 1\nb{x="1",} 2\nc{ x = "1" , y="2" } 3\nd{y="2",x="1"} 4\nname:with:colons{_l="v"} 5\n'
    keys = parse(body).batch.keys
    assert keys[0] == SeriesKey("a")
    assert keys[1] == SeriesKey.of("b", x="1")
    assert keys[2] == SeriesKey.of("c", x="1", y="2")
    assert keys[3] == SeriesKey.of("d", x="1", y="2")
    assert keys[4] == SeriesKey.of("name:with:colons", _l="v")


def test_blank_lines_comments_crlf_and_trailing_whitespace() -> None:
    body = "\r\n# just a comment\r\n#HELPER not metadata\r\n  \r\nm{a=\"1\"} 2 \t\r\n\tindented 3\r\n\n"
    res = parse(body)
    assert triples(res) == [("m", (("a", "1"),), "2.0"), ("indented", (), "3.0")]
    assert res.families == {}


def test_explicit_timestamps_prometheus_ms() -> None:
    res = parse("a 1 1700000000123\nb{x=\"y\"} 2 -5\nc 3\n")
    assert res.batch.ts_ms.tolist() == [1700000000123, -5, TS]


def test_help_type_unit_collected() -> None:
    body = '# HELP m Some "help" with \\\\ and \\n escapes\n# TYPE m histogram\n# UNIT m seconds\nm_count 1\n'
    fam = parse(body).families["m"]
    assert fam == FamilyMeta("m", "histogram", 'Some "help" with \\ and \n escapes', "seconds")
    repeated = parse("# TYPE m gauge\n# HELP m first\n# TYPE m counter\n# HELP m second\nm 1\n")
    assert repeated.families["m"] == FamilyMeta("m", "gauge", "first", "")  # the first wins
    only_help = parse("# HELP x helpful\nx 1\n").families["x"]
    assert only_help.type == "untyped" and only_help.help == "helpful"


def test_openmetrics_body() -> None:
    res = parse(OPENMETRICS)
    assert res.openmetrics
    got = {(n, dict(lb).get("le", ""), v) for n, lb, v in triples(res)}
    assert ("vllm:e2e_request_latency_seconds_bucket", "1.0", "3.0") in got  # exemplar dropped
    assert res.batch.ts_ms.tolist()[0] == 1_700_000_000_500  # float seconds -> ms
    assert res.batch.ts_ms.tolist()[1:] == [TS] * (len(res.batch) - 1)
    assert res.families["vllm:e2e_request_latency_seconds"].unit == "seconds"
    assert res.families["vllm:prompt_tokens"].type == "counter"
    assert res.families["build"].type == "info"
    assert parse(OPENMETRICS, openmetrics=True).batch.values.tolist() == res.batch.values.tolist()


def test_openmetrics_detection_and_content_type() -> None:
    assert parse("a 1 5\n# EOF\n").batch.ts_ms.tolist() == [5000]  # detected: seconds
    assert parse("a 1 5\n").batch.ts_ms.tolist() == [5]  # 0.0.4: milliseconds
    assert parse("# UNIT a_seconds seconds\na_seconds 1 5\n").batch.ts_ms.tolist() == [5000]
    assert parse("# UNIT a_seconds seconds\na_seconds 1\n").openmetrics
    assert not parse("a 1 5\n# EOF\n", openmetrics=False).openmetrics  # '# EOF' is a comment
    assert is_openmetrics_content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert is_openmetrics_content_type("Application/OpenMetrics-Text")
    assert not is_openmetrics_content_type("text/plain; version=0.0.4; charset=utf-8")
    assert not is_openmetrics_content_type(None) and not is_openmetrics_content_type("")


def test_bytes_input_and_bom() -> None:
    body = '\ufeffm{model="Llama-3 \u00e9"} 1\n'.encode()
    assert parse(body).batch.keys[0].get("model") == "Llama-3 \u00e9"


def test_duplicate_series_reuse_key_index() -> None:
    res = parse('a{x="1"} 1 1000\nb 2\na{x="1"} 3 2000\n')
    assert len(res.batch.keys) == 2
    assert res.batch.key_index.tolist() == [0, 1, 0]
    assert res.batch.values.tolist() == [1.0, 2.0, 3.0]


def test_empty_body() -> None:
    assert len(parse("").batch) == 0 and len(parse(b"\n\n").batch) == 0


# --- equivalence with prometheus_client and real captures -----------------------------------

@pytest.mark.parametrize("body", [VLLM, DCGM, TGI, TRITON], ids=["vllm", "dcgm", "tgi", "triton"])
def test_matches_prometheus_client(body: str) -> None:
    ours = triples(parse(body))
    assert len(ours) == len(set(ours))
    assert set(ours) == client_triples(body)


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: Path(p).name)
def test_captured_bodies_parse(path: str) -> None:
    file = Path(path)
    if not file.exists():
        pytest.skip(f"{path} not available")
    raw = file.read_bytes()
    res = parse(raw)
    assert len(res.batch) > 0
    assert set(triples(res)) == client_triples(raw.decode())


# --- property: rendered samples round-trip ---------------------------------------------------

_label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True)
_metric_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_metric_names, st.dictionaries(_label_names, st.text(max_size=12), max_size=4),
                          st.floats(allow_nan=True), st.none() | st.integers(-(2**62), 2**62)),
                min_size=1, max_size=8))
def test_rendered_samples_round_trip(
    samples: list[tuple[str, dict[str, str], float, int | None]],
) -> None:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    body = "".join(
        name + ("{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}" if labels else "")
        + f" {value!r}".replace("inf", "Inf").replace("nan", "NaN") + ("" if ts is None else f" {ts}") + "\n"
        for name, labels, value, ts in samples
    )
    cache = SeriesCache()
    for _ in range(2):  # cold, then warm
        res = parse(body, cache=cache)
        assert [s.series for s in res.batch.samples()] == [SeriesKey.of(n, lb) for n, lb, _, _ in samples]
        assert [_v(s.value) for s in res.batch.samples()] == [_v(v) for _, _, v, _ in samples]
        assert res.batch.ts_ms.tolist() == [TS if ts is None else ts for _, _, _, ts in samples]
