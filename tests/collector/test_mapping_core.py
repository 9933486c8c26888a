"""Canonical mapping machinery: detection, documentation, staleness, batching, caching, fuzzing."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.exposition import parse_exposition
from collector.mapping import CANONICAL, CanonicalMapper, detect_engine, sample_names, to_canonical
from collector.mapping.plan import ENGINE_RULES
from store.types import STALE_NAN, SampleBatch, SeriesKey, is_stale_marker
from tests.collector.mapping_fixtures import (
    DCGM_RELEASED,
    FIXTURES,
    SGLANG,
    TRITON,
    TS,
    VLLM_V1,
    canon,
    parse,
)

SHARED = Path("/work/shared")
CAPTURES = {
    "reference/samples/vllm_metrics_datadog_fixture.txt": "vllm",
    "reference/samples/vllm_v1_metrics_partial_capture.txt": "vllm",
    "reference/samples/triton_trtllm_metrics_readme.txt": "triton",
    "reference/samples/dcgm_exporter_metrics_excerpt.txt": "dcgm",
    "data/captured/dcgm_exporter_metrics_upcloud_L40S.prom": "dcgm",
    "reference/samples/nccl_inspector_prom_readme_examples.prom": "unknown",
}
ALL_SAMPLE_NAMES = {s for name in CANONICAL for s in sample_names(name)}


# --- detection --------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_detect_engine_on_fixtures(fixture: str) -> None:
    body, engine = FIXTURES[fixture]
    assert detect_engine(k.name for k in parse(body).keys) == engine


@pytest.mark.parametrize("relpath", sorted(CAPTURES))
def test_detect_engine_on_captured_files(relpath: str) -> None:
    path = SHARED / relpath
    if not path.exists():
        pytest.skip(f"{path} not present")
    batch = parse_exposition(path.read_bytes(), default_ts_ms=TS).batch
    engine = detect_engine(k.name for k in batch.keys)
    assert engine == CAPTURES[relpath]
    out = to_canonical(batch)
    assert (len(out) > 0) == (engine != "unknown")
    assert all(k.get("engine") == engine and k.name in ALL_SAMPLE_NAMES for k in out.keys)


def test_captured_dcgm_values_follow_the_raw_ones() -> None:
    path = SHARED / "data/captured/dcgm_exporter_metrics_upcloud_L40S.prom"
    if not path.exists():
        pytest.skip(f"{path} not present")
    batch = parse_exposition(path.read_bytes(), default_ts_ms=TS).batch
    raw = {k.name: float(batch.values[i]) for i, k in enumerate(batch.keys)}
    out = {k.name: float(v) for k, v in zip(to_canonical(batch).keys, to_canonical(batch).values)}
    assert out["gpu_memory_free_bytes"] == raw["DCGM_FI_DEV_FB_FREE"] * 1048576
    assert out["gpu_energy_joules_total"] == pytest.approx(raw["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] / 1000)
    assert out["gpu_sm_clock_hertz"] == raw["DCGM_FI_DEV_SM_CLOCK"] * 1e6
    assert out["gpu_utilization_ratio"] == raw["DCGM_FI_DEV_GPU_UTIL"] / 100
    assert out["gpu_dram_active_ratio"] == raw["DCGM_FI_PROF_DRAM_ACTIVE"]
    assert {k.get("host") for k in to_canonical(batch).keys} == {"gpu1-wl8sg"}  # from Hostname


def test_detect_engine_majority_and_ties() -> None:
    assert detect_engine([]) == "unknown"
    assert detect_engine(["up", "process_cpu_seconds_total", "http_requests_total"]) == "unknown"
    assert detect_engine(["vllm:a", "vllm:b", "DCGM_FI_DEV_GPU_UTIL"]) == "vllm"
    assert detect_engine(["vllm:a", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_SM_CLOCK"]) == "dcgm"
    assert detect_engine(["nv_gpu_utilization", "DCGM_FI_DEV_GPU_UTIL"]) == "triton"  # tie: server first
    assert detect_engine(["vllm:a", "vllm:a", "vllm:a", "sglang:a", "sglang:b"]) == "sglang"  # distinct names


# --- unknown / mismatched engines -------------------------------------------------------------


def test_unknown_engines_produce_nothing() -> None:
    assert len(to_canonical(parse(FIXTURES["generic_only"][0]))) == 0
    assert len(to_canonical(parse(VLLM_V1), "unknown")) == 0
    assert len(to_canonical(SampleBatch.empty())) == 0
    assert canon(VLLM_V1, "tgi") == {}  # an explicit engine applies only its own table


def test_explicit_engine_picks_one_exporter_of_a_mixed_batch() -> None:
    mixed = parse(VLLM_V1 + DCGM_RELEASED)
    assert set(canon(mixed, "dcgm")) == set(canon(DCGM_RELEASED))
    assert set(canon(mixed, "vllm")) == set(canon(VLLM_V1))


# --- the documented set -----------------------------------------------------------------------


def test_every_rule_target_is_documented_with_its_type() -> None:
    for engine, rules in ENGINE_RULES.items():
        for raw, family in rules.families.items():
            for rule in family:
                doc = CANONICAL.get(rule.target)
                assert doc is not None, (engine, raw, rule.target)
                expected = ("histogram", "summary") if rule.histogram and not rule.only else None
                if expected:
                    assert doc.type in expected, (engine, raw)
                else:
                    assert doc.type in ("counter", "gauge"), (engine, raw)
                assert raw in doc.help, (engine, raw, rule.target)  # the help text is the source table


def test_canonical_names_follow_conventions() -> None:
    for name, doc in CANONICAL.items():
        assert doc.help and doc.type in ("counter", "gauge", "histogram", "summary")
        assert name.endswith("_total") == (doc.type == "counter"), name
        if doc.unit:
            assert doc.unit in name, name


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_fixture_output_is_documented_and_labelled(fixture: str) -> None:
    body, engine = FIXTURES[fixture]
    out = to_canonical(parse(body))
    assert len(set(out.keys)) == len(out.keys)
    for key in out.keys:
        assert key.name in ALL_SAMPLE_NAMES
        assert key.get("engine") == engine
        labels = key.labels_dict()
        raw_only = {"finished_reason", "tp_rank", "dp_rank", "is_streaming", "UUID", "Hostname", "hostname"}
        assert not raw_only & labels.keys(), key
        assert "model_name" not in labels, key  # vLLM's served-model label, never on canonical series


# --- values: staleness, NaN, batches with several timestamps or repeated series ----------------


def _assembled(body: str, stale: set[str]) -> SampleBatch:
    """Like the scrape loop's batch: series in ``stale`` carry the staleness marker."""
    batch = parse(body)
    values = np.array(batch.values, dtype=np.float64)
    for i, key in enumerate(batch.keys):
        if key.canonical() in stale:
            values[i] = STALE_NAN
    return SampleBatch(batch.keys, batch.key_index, batch.ts_ms, values)


def test_stale_inputs_are_skipped_and_all_stale_propagates() -> None:
    q = 'model_name="Qwen/Qwen2.5-7B-Instruct"'
    stale = {
        f'vllm:num_requests_running{{engine="0",{q}}}',
        f'vllm:num_requests_waiting{{engine="0",{q}}}',
        f'vllm:num_requests_waiting{{engine="1",{q}}}',
    }
    out = to_canonical(_assembled(VLLM_V1, stale))
    by_name = {k.name: out.values[i] for i, k in enumerate(out.keys) if "outcome" not in dict(k.labels)}
    assert by_name["inference_requests_running"] == 3.0  # engine 1 only
    waiting = np.array([by_name["inference_requests_waiting"]])
    assert is_stale_marker(waiting).all()  # every input stale -> stale marker, bit for bit


def test_nan_values_propagate_as_nan() -> None:
    out = canon(
        'vllm:num_requests_running{engine="0",model_name="m"} NaN\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 2\n'
    )
    (value,) = out.values()
    assert math.isnan(value)


def test_several_timestamps_are_mapped_separately() -> None:
    a, b = parse(TRITON, TS), parse(TRITON, TS + 15_000)
    b_values = np.asarray(b.values) * 2
    both = SampleBatch(
        list(a.keys),
        np.concatenate([a.key_index, b.key_index]),
        np.concatenate([a.ts_ms, b.ts_ms]),
        np.concatenate([a.values, b_values]),
    )
    out = to_canonical(both)
    single = to_canonical(a)
    assert len(out) == 2 * len(single) and len(out.keys) == len(single.keys)
    first = {out.keys[int(i)]: v for i, t, v in zip(out.key_index, out.ts_ms, out.values) if t == TS}
    second = {out.keys[int(i)]: v for i, t, v in zip(out.key_index, out.ts_ms, out.values) if t != TS}
    for key, value in zip(single.keys, single.values):
        assert first[key] == value
        ratio = key.name == "inference_kv_cache_usage_ratio"  # used/max: both doubled
        assert second[key] == pytest.approx(value if ratio else 2 * value)


@pytest.mark.parametrize("body", [VLLM_V1, SGLANG, TRITON, DCGM_RELEASED])
def test_sample_order_does_not_matter(body: str) -> None:
    batch = parse(body)
    order = np.random.default_rng(7).permutation(len(batch))
    shuffled = SampleBatch(batch.keys, batch.key_index[order], batch.ts_ms[order], batch.values[order])
    assert canon(shuffled) == pytest.approx(canon(batch))


def test_target_labels_pass_through_and_collisions_are_kept_aside() -> None:
    key = SeriesKey.of(
        "vllm:num_requests_running",
        {
            "engine": "0",
            "model_name": "m",
            "model": "from-relabel",
            "job": "vllm",
            "instance": "10.0.0.7:8000",
        },
    )
    batch = SampleBatch.one_per_key([key], TS, np.array([4.0]))
    (out,) = to_canonical(batch).keys
    assert out.labels_dict() == {
        "engine": "vllm",
        "model": "m",
        "exported_model": "from-relabel",
        "job": "vllm",
        "instance": "10.0.0.7:8000",
    }


def test_raw_engine_label_of_other_exporters_is_kept_aside() -> None:
    key = SeriesKey.of("tgi_queue_size", {"engine": "tgi-3.1"})
    (out,) = to_canonical(SampleBatch.one_per_key([key], TS, np.array([1.0])), "tgi").keys
    assert out.labels_dict() == {"engine": "tgi", "exported_engine": "tgi-3.1"}


# --- fuzzing ----------------------------------------------------------------------------------


def _raw_names(engines: list[str]) -> list[str]:
    families = [name for engine in engines for name in ENGINE_RULES[engine].families]  # type: ignore[index]
    return sorted(
        {*families, *(f"{name}{suffix}" for name in families for suffix in ("_bucket", "_sum", "_count"))}
        | {"up", "http_requests_total", "process_cpu_seconds_total", "vllm:unknown_thing"}
    )


ENGINES = ["vllm", "sglang", "tgi", "triton", "dcgm"]
RAW_NAMES = {engine: _raw_names([engine]) for engine in ENGINES} | {"any": _raw_names(ENGINES)}

LABEL_NAMES = [
    "le",
    "engine",
    "model_name",
    "model",
    "name",
    "finished_reason",
    "reason",
    "err",
    "status",
    "handler",
    "tp_rank",
    "dp_rank",
    "pp_rank",
    "moe_ep_rank",
    "is_streaming",
    "request_type",
    "kv_cache_block_type",
    "UUID",
    "uuid",
    "gpu_uuid",
    "Hostname",
    "hostname",
    "modelName",
    "gpu",
    "exported_model",
    "outcome",
    "DCGM_FI_DRIVER_VERSION",
    "err_code",
    "job",
    "instance",
]
LABEL_VALUES = st.one_of(
    st.sampled_from(
        [
            "",
            "0",
            "1",
            "stop",
            "abort",
            "error",
            "CANCELED",
            "5xx",
            "used",
            "max",
            "active",
            "+Inf",
            "0.5",
            "100",
            "NaN",
            "-Inf",
            "1e400",
            "abc",
        ]
    ),
    st.text(max_size=8),
)
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([STALE_NAN, 9223372036854775794.0, 140737488355328.0, 0.0, -1.0]),
)


@st.composite
def batches(draw: st.DrawFn, names: list[str]) -> SampleBatch:
    keys = draw(
        st.lists(
            st.builds(
                lambda name, labels: SeriesKey(name, tuple(labels.items())),
                st.sampled_from(names),
                st.dictionaries(st.sampled_from(LABEL_NAMES), LABEL_VALUES, max_size=6),
            ),
            min_size=1,
            max_size=25,
            unique=True,
        )
    )
    n = draw(st.integers(0, 40))
    index = draw(st.lists(st.integers(0, len(keys) - 1), min_size=n, max_size=n))
    values = draw(st.lists(VALUES, min_size=n, max_size=n))
    stamps = draw(st.lists(st.sampled_from([TS, TS + 1, TS + 30_000]), min_size=n, max_size=n))
    return SampleBatch(
        keys, np.array(index, np.int64), np.array(stamps, np.int64), np.array(values, np.float64)
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from([*ENGINES, "any"]),
    engine=st.sampled_from([None, *ENGINES, "unknown"]),
    data=st.data(),
)
def test_random_batches_never_raise(source: str, engine: None | str, data: st.DataObject) -> None:
    # names of one engine (so mapping has work to do) or of all; engine given or detected
    batch = data.draw(batches(RAW_NAMES[source]))
    if engine is not None and source != "any" and data.draw(st.booleans()):
        engine = source
    mapper = CanonicalMapper(max_series=40)
    out = mapper.map(batch, engine)  # type: ignore[arg-type]
    again = mapper.map(batch, engine)  # type: ignore[arg-type]
    assert len(out.key_index) == len(out.ts_ms) == len(out.values)
    assert len(set(out.keys)) == len(out.keys)
    assert set(zip(out.key_index.tolist(), out.ts_ms.tolist())) == set(
        zip(again.key_index.tolist(), again.ts_ms.tolist())
    )
    seen = set()
    for i, t in zip(out.key_index.tolist(), out.ts_ms.tolist()):
        assert (i, t) not in seen  # one value per canonical series and timestamp
        seen.add((i, t))
    for key in out.keys:
        assert key.name in ALL_SAMPLE_NAMES
        assert key.get("engine") in ("vllm", "sglang", "tgi", "triton", "dcgm")
        assert all(value for _, value in key.labels if _ != "le")
