"""Mapping plans: each key list is compiled once and reused while it repeats; the plan book
is bounded; dedupe groups are right without interning one per series (a series named twice in
one key list is one series)."""

from __future__ import annotations

import numpy as np
import pytest

from collector.mapping import CanonicalMapper
from store.types import SampleBatch, SeriesKey
from tests.collector.mapping_fixtures import DCGM_RELEASED, SGLANG, TS, VLLM_V1, canon, parse


def test_compiled_plan_is_reused_for_an_equal_key_list() -> None:
    mapper = CanonicalMapper()
    first = parse(SGLANG)
    a = mapper.map(first)
    assert len(mapper._compiled) == 1
    again = SampleBatch(list(first.keys), first.key_index, first.ts_ms + 1000, first.values)
    b = mapper.map(again)
    assert len(mapper._compiled) == 1 and list(a.keys) == list(b.keys)
    assert np.array_equal(a.values, b.values) and (b.ts_ms == TS + 1000).all()


@pytest.mark.parametrize("engine", ["dcgm", "vllm", "sglang"])
def test_a_series_named_twice_in_a_key_list_is_averaged_once(engine: str) -> None:
    """Equal keys at two positions of one list are one raw series: mapped, its values are
    averaged as one series' repeats, whether or not the engine has dedupe labels or aliases."""
    body = {"dcgm": DCGM_RELEASED, "vllm": VLLM_V1, "sglang": SGLANG}[engine]
    batch = parse(body)
    keys = list(batch.keys)
    n = len(keys)
    twice = SampleBatch(keys + [SeriesKey(k.name, tuple(k.labels)) for k in keys], np.arange(2 * n),
                        np.full(2 * n, TS), np.concatenate([batch.values, batch.values * 3]))
    doubled = SampleBatch(keys, batch.key_index, batch.ts_ms, batch.values * 2)  # the mean of v and 3v
    mapper = CanonicalMapper()
    mean = {s.canonical(): v for s, v in zip(*_keys_values(mapper.map(doubled, engine)))}  # type: ignore[arg-type]
    both = {s.canonical(): v for s, v in zip(*_keys_values(mapper.map(twice, engine)))}  # type: ignore[arg-type]
    assert mean and set(both) == set(mean)
    for name, value in mean.items():
        assert both[name] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), name


def _keys_values(batch: SampleBatch) -> tuple[list[SeriesKey], list[float]]:
    return [batch.keys[i] for i in batch.key_index.tolist()], batch.values.tolist()


def test_plan_book_is_bounded() -> None:
    mapper = CanonicalMapper(max_series=10)
    for i in range(5):
        body = VLLM_V1.replace("Qwen/Qwen2.5-7B-Instruct", f"model-{i}")
        for _ in range(2):  # cold, then from the compiled plan
            mapped = mapper.map(parse(body))
            assert {s.canonical(): v for s, v in zip(mapped.keys, mapped.values)} == canon(body)
    assert len(mapper.book._plans) <= 10 + len(parse(VLLM_V1).keys)
