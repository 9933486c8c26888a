"""The store benchmark's pressure section runs early checkpoints beside paced appends and
reports what it measured (a small run of the same code)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.store_pressure import (
    _float_chunks,
    _gpu_chunks,
    _spread,
    chunk_encoding_s,
    decimals_search_s,
    float_chunk_decoding_s,
    head_block_packing,
    run_pressure,
)


def test_the_pressure_section_measures_a_store_that_checkpoints_early(tmp_path: Path) -> None:
    run = run_pressure(tmp_path / "pressure.sqlite", series=2_000, targets=2, warm=310, measure=600, pace_s=0.01)
    assert run.checkpoints >= 2  # the out-of-order window alone is over max_head_samples
    # Flushed samples left the head: of 910 s appended it holds the out-of-order window (300 s)
    # and what came since the last checkpoint. The data clock runs 100x faster than the wall's,
    # so in a loaded suite a checkpoint may still be writing at the end (550 s was seen).
    assert run.head_samples < 2_000 * 700
    assert 50 < run.rss_max_mib < 4_096  # read once a round: the interpreter, numpy, the head
    assert run.cpu_per_m > 0 and run.checkpoint_cpu_per_m > 0 and 0 < run.p50_ms <= run.p99_ms <= run.max_ms
    # half three-decimal gauges (packed: a few bytes), half floats (raw bits: eight and more)
    assert 2.0 < run.head_bytes_per_sample < 16.0
    # slices of at least 5,000 samples (the least), in whole series: a series' 300-odd samples
    # at most short of it -- or the whole of a smaller checkpoint
    assert 1_000 < run.samples_per_slice <= 50_000


def test_the_pressure_section_times_the_encoding_of_float_and_gpu_chunks() -> None:
    for chunks in (_float_chunks(200, 75), _gpu_chunks(200, 75)):
        times = chunk_encoding_s(chunks, runs=2)  # and checks that they decode back
        assert len(times) == 2 and all(t > 0 for t in times)


def test_the_gpu_chunks_are_integer_series_of_every_kind_with_jittered_timestamps() -> None:
    ts, values, starts = _gpu_chunks(300, 75)
    assert len(starts) == 300 and len(ts) == len(values) == 300 * 75
    assert np.array_equal(values, np.round(values, 3))  # integers once scaled: the codec's INT mode
    gaps = np.diff(ts.reshape(300, 75), axis=1)
    assert gaps.min() < 1000 < gaps.max() <= 1006  # 1 s scrapes, a few ms of jitter
    counters = values.reshape(300, 75)[200:]  # the last third: energy, never decreasing
    assert (np.diff(counters, axis=1) >= 0).all() and len(np.unique(values)) > 1000


def test_the_pressure_section_times_the_decoding_of_those_chunks() -> None:
    times, size = float_chunk_decoding_s(chunks=200, samples=75, runs=2)
    assert len(times) == 2 and all(t > 0 for t in times)
    assert 1.0 < size < 16.0  # varying floats: some bytes a sample, fewer than raw timestamps and values


def test_the_pressure_section_times_the_decimals_search() -> None:
    times = decimals_search_s(segments=200, samples=75, runs=2)  # and checks what it found
    assert len(times) == 2 and all(t > 0 for t in times)


def test_the_pressure_section_times_a_packed_head_block() -> None:
    packing, decoding, reading, size = head_block_packing(series=300, samples=120, runs=2)
    assert all(len(times) == 2 and all(t >= 0 for t in times) for times in (packing, decoding, reading))
    assert 3.0 < size < 5.0  # three bytes a value, one of jitter, some per-series fields


def test_the_pressure_section_prints_a_median_with_its_range() -> None:
    assert _spread([0.83, 0.33, 0.35]) == "0.35 [0.33..0.83, median of 3]"
    assert _spread([0.068, 0.070], 1e3, 0) == "69 [68..70, median of 2]"
