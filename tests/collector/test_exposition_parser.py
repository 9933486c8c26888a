"""Tests for collector.exposition.parser (Prometheus text 0.0.4 / OpenMetrics 1.0)."""

from __future__ import annotations

import math
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from collector.exposition import (
    FamilyMeta,
    ParseError,
    ParseResult,
    SeriesCache,
    is_openmetrics_content_type,
    parse_exposition,
)
from store.types import SeriesKey

TS = 1_700_000_000_000

# --- fixtures written for these tests, in the shapes of the real exporters --------------------

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.41796875
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.234567e+06
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7769301736864982e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 812.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="meta-llama/Llama-3.1-8B-Instruct"} 17.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.02",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 790.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="2.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} 829.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 829.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 829.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 96.30129837989807
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_gpu_blocks="7281"} 1.0
"""

DCGM = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445556",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 1755
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 412.337000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445556",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 96.01
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15",container="vllm",namespace="inference",pod="vllm-0"} 98213311045
# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.
# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",UUID="GPU-0a1b2c3d-0000-1111-2222-333344445555",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="570.86.15"} 0.000003
"""

TGI = """\
# TYPE tgi_request_count counter
tgi_request_count 1520

# TYPE tgi_request_failure counter
tgi_request_failure{err="validation"} 4
tgi_request_failure{err="overloaded"} 1

# TYPE tgi_queue_size gauge
tgi_queue_size 2

# TYPE tgi_batch_inference_duration histogram
tgi_batch_inference_duration_bucket{method="prefill",le="0.000015"} 0
tgi_batch_inference_duration_bucket{method="prefill",le="0.0000225"} 0
tgi_batch_inference_duration_bucket{method="prefill",le="0.05"} 377
tgi_batch_inference_duration_bucket{method="prefill",le="+Inf"} 402
tgi_batch_inference_duration_sum{method="prefill"} 19.554219361
tgi_batch_inference_duration_count{method="prefill"} 402

# TYPE tgi_request_mean_time_per_token_duration summary
tgi_request_mean_time_per_token_duration{quantile="0.5"} 0.021
tgi_request_mean_time_per_token_duration{quantile="0.99"} 0.0483
tgi_request_mean_time_per_token_duration_sum 31.9
tgi_request_mean_time_per_token_duration_count 1515
"""

TRITON = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="ensemble",version="1"} 2048
nv_inference_request_success{model="tensorrt_llm",version="1"} 2048
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds (includes cached requests)
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="tensorrt_llm",version="1"} 9.87654e+08
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43"} 0.87
# HELP nv_trt_llm_kv_cache_block_statistics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_statistics gauge
nv_trt_llm_kv_cache_block_statistics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 6239
nv_trt_llm_kv_cache_block_statistics{kv_cache_block_type="free",model="tensorrt_llm",version="1"} 6120
nv_trt_llm_kv_cache_block_statistics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 119
"""

OPENMETRICS = """\
# TYPE vllm:prompt_tokens counter
# HELP vllm:prompt_tokens Number of prefill tokens processed.
vllm:prompt_tokens_total{engine="0",model_name="m"} 42.0 1700000000.5
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:e2e_request_latency_seconds histogram
# UNIT vllm:e2e_request_latency_seconds seconds
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 3 # {trace_id="4bf92f3577b34da6"} 0.61 1700000000.123
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 4
vllm:e2e_request_latency_seconds_count{model_name="m"} 4
vllm:e2e_request_latency_seconds_sum{model_name="m"} 5.5
# TYPE build info
build_info{version="0.9.1"} 1
# EOF
"""

CAPTURED = [
    "/work/shared/reference/samples/vllm_v1_metrics_partial_capture.txt",
    "/work/shared/reference/samples/vllm_metrics_datadog_fixture.txt",
    "/work/shared/reference/samples/dcgm_exporter_metrics_excerpt.txt",
    "/work/shared/reference/samples/triton_trtllm_metrics_readme.txt",
    "/work/shared/reference/samples/nccl_inspector_prom_readme_examples.prom",
    "/work/shared/data/captured/dcgm_exporter_metrics_upcloud_L40S.prom",
]

Triple = tuple[str, tuple[tuple[str, str], ...], str]


def _v(value: float) -> str:
    return "nan" if math.isnan(value) else repr(float(value))


def parse(body: str | bytes, **kw: object) -> ParseResult:
    return parse_exposition(body, default_ts_ms=TS, **kw)  # type: ignore[arg-type]


def triples(result: ParseResult) -> list[Triple]:
    return [(s.series.name, s.series.labels, _v(s.value)) for s in result.batch.samples()]


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


# --- the series cache -----------------------------------------------------------------------

def test_warm_cache_gives_same_result_as_cold() -> None:
    for body in (VLLM, DCGM, TGI, TRITON, OPENMETRICS):
        cache = SeriesCache()
        cold = parse(body, cache=cache)
        assert cache.misses == len(cold.batch) and cold.new_series == len(cold.batch)
        warm = parse(body, cache=cache)
        assert warm.new_series == 0 and cache.hits == len(warm.batch)
        assert triples(warm) == triples(cold)
        assert warm.batch.ts_ms.tolist() == cold.batch.ts_ms.tolist()
        assert warm.families == cold.families
        assert all(a is b for a, b in zip(warm.batch.keys, cold.batch.keys))  # interned


def test_cache_hit_still_validates_value_part() -> None:
    cache = SeriesCache()
    parse('m{a="b"} 1\nn 1\n', cache=cache)
    assert cache.get('m{a="b"}') == SeriesKey.of("m", a="b") and cache.get("n") == SeriesKey("n")
    for bad, reason in [('m{a="b"} x', "invalid value"), ('m{a="b"}1', "expected blank"),
                        ('m{a="b"} 1 2 3', "unexpected text"), ("n 1_0", "invalid value"),
                        ("n} 1", "invalid metric name"), ('m{a="b" 1', "expected ','"),
                        ('m{a="b"', "unterminated label set")]:
        with pytest.raises(ParseError) as info:
            parse(f"n 2\n{bad}\n", cache=cache)
        assert info.value.line == 2 and reason in info.value.reason, bad
    assert parse('m{a="b"} 5 1234\n', cache=cache).batch.ts_ms.tolist() == [1234]


def test_cached_series_with_stray_hash_in_openmetrics_matches_cold() -> None:
    body = 'm{a="b"} # 5.5\n# EOF\n'  # ' # ' outside a label set starts an exemplar in OM
    with pytest.raises(ParseError) as cold:
        parse(body)
    cache = SeriesCache()
    parse('m{a="b"} 1\n', cache=cache)
    with pytest.raises(ParseError) as warm:
        parse(body, cache=cache)
    assert cold.value.reason == warm.value.reason == "missing value"


def test_cache_interns_equal_keys_and_is_bounded() -> None:
    cache = SeriesCache(max_entries=3)
    res = parse('m{a="1",b="2"} 1\nm{b="2",a="1"} 2\n', cache=cache)
    assert len(res.batch.keys) == 1 and res.batch.key_index.tolist() == [0, 0]
    parse("x 1\ny 1\nz 1\n", cache=cache)
    assert len(cache) >= 3
    parse("x 1\n", cache=cache)  # full at the start of this parse: cleared, then refilled
    assert len(cache) == 1
    parse("# a\n# b\n# c\nx 1\n", cache=cache)
    parse("# d\nx 1\n", cache=cache)
    assert len(cache._comments) == 1  # remembered comment lines are bounded the same way
    with pytest.raises(ValueError):
        SeriesCache(max_entries=0)


# --- keep_family ------------------------------------------------------------------------------

def test_keep_family_skips_families() -> None:
    asked: list[str] = []

    def keep(family: str) -> bool:
        asked.append(family)
        return family.startswith("vllm:time_to_first_token") or family == "vllm:prompt_tokens_total"

    for cache in (None, SeriesCache()):
        res = parse(VLLM, keep_family=keep, cache=cache)
        res = parse(VLLM, keep_family=keep, cache=cache) if cache else res  # warm path too
        names = {n for n, _, _ in triples(res)}
        assert names == {"vllm:prompt_tokens_total", "vllm:time_to_first_token_seconds_bucket",
                         "vllm:time_to_first_token_seconds_count", "vllm:time_to_first_token_seconds_sum"}
        assert res.skipped_samples == 7
    assert "vllm:time_to_first_token_seconds" in asked  # _bucket/_sum/_count stripped (TYPE'd)
    assert "vllm:time_to_first_token_seconds_bucket" not in asked
    assert len(asked) == len(set(asked)) * 3  # once per family per parse (three parses)


def test_keep_family_suffix_rules_and_unparsed_labels() -> None:
    body = ("# TYPE c counter\nc_total 1\nc_created 2\n# TYPE g gauge\ng_total 3\n"
            "untyped_bucket 4\n# TYPE i info\ni_info{v=\"1\"} 1\n")
    seen: list[str] = []

    def keep_all(family: str) -> bool:
        seen.append(family)
        return True

    parse(body, keep_family=keep_all)
    assert seen == ["c", "g_total", "untyped_bucket", "i"]
    # a dropped family's labels are not parsed, so their defects go unnoticed
    res = parse('drop{bad label} 1\nkeep 2\n', keep_family=lambda f: f == "keep")
    assert triples(res) == [("keep", (), "2.0")] and res.skipped_samples == 1
    with pytest.raises(ParseError):
        parse('keep{bad label} 1\n', keep_family=lambda f: f == "keep")


def test_keep_family_with_warm_cache_and_changing_verdicts() -> None:
    cache = SeriesCache()
    drop_ttft = lambda f: f != "vllm:time_to_first_token_seconds"  # noqa: E731
    cold = parse(VLLM, keep_family=drop_ttft)
    parse(VLLM, keep_family=drop_ttft, cache=cache)
    warm = parse(VLLM, keep_family=drop_ttft, cache=cache)
    assert triples(warm) == triples(cold) and warm.skipped_samples == cold.skipped_samples == 7
    everything = parse(VLLM, keep_family=lambda f: True, cache=cache)  # dropped before, kept now
    assert triples(everything) == triples(parse(VLLM)) and everything.skipped_samples == 0
    # a remembered dropped text never excuses a different, malformed line
    om_cache = SeriesCache()
    drop = parse("foo # x\n# EOF\n", keep_family=lambda f: False, cache=om_cache, openmetrics=True)
    assert drop.skipped_samples == 1
    with pytest.raises(ParseError, match="missing value"):
        parse("foo\n# EOF\n", keep_family=lambda f: False, cache=om_cache, openmetrics=True)


# --- property: never anything but ParseError; cold and warm parses agree ------------------------

VALID = VLLM + DCGM + TGI + TRITON


def _odd(family: str) -> bool:
    return len(family) % 2 == 1


def _outcome(body: str, cache: SeriesCache | None, keep: Callable[[str], bool] | None = None) -> object:
    try:
        res = parse(body, cache=cache, keep_family=keep)
    except ParseError as err:
        return ("error", err.line, err.reason)
    return (triples(res), res.batch.ts_ms.tolist(), res.batch.key_index.tolist(), res.skipped_samples)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    lines = (VALID if draw(st.booleans()) else OPENMETRICS).split("\n")
    start = draw(st.integers(0, len(lines) - 3))
    body = "\n".join(lines[start : start + draw(st.integers(1, 12))])
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(body)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = draw(st.text(alphabet=st.sampled_from(list('{}",=\\ #\t\r\nabc_:.0159+-eEInfNa\u00e9\x00')),
                             min_size=1, max_size=4))
        if action == "insert":
            body = body[:pos] + chunk + body[pos:]
        elif action == "delete":
            body = body[:pos] + body[pos + len(chunk):]
        else:
            body = body[:pos] + chunk + body[pos + len(chunk):]
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_random_input_parses_or_raises_parse_error(body: str | bytes) -> None:
    try:
        res = parse(body)
    except ParseError:
        return
    assert len(res.batch.keys) <= len(res.batch)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_bodies_parse_or_raise_and_warm_equals_cold(body: str) -> None:
    for keep in (None, _odd):
        cold = _outcome(body, None, keep)
        cache = SeriesCache()
        _outcome(VALID, cache, keep)
        _outcome(OPENMETRICS, cache, keep)
        assert _outcome(body, cache, keep) == cold  # a primed cache changes nothing


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


def _even_initial(family: str) -> bool:
    return ord(family[0]) % 2 == 0  # a family and its samples' names share the first character


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_keep_family_keeps_exactly_the_chosen_samples(body: str) -> None:
    try:
        full = parse(body)
    except ParseError:
        return  # dropped lines are not validated, so only accepted bodies have an oracle
    for cache in (None, SeriesCache()):
        for _ in range(2):
            kept = parse(body, keep_family=_even_initial, cache=cache)
            assert triples(kept) == [t for t in triples(full) if _even_initial(t[0])]
            assert kept.skipped_samples == len(full.batch) - len(kept.batch)
