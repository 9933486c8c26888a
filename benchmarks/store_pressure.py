"""Section ``pressure`` of :mod:`benchmarks.store_bench` (opt-in): the store's own CPU per
million samples while early checkpoints run, as in ``infermeter up`` at 100 k series scraped
every second, without the scraping, parsing and rules around it.

Why: the scrape benchmark's CPU windows swing by 5x at that size (an early checkpoint falls in
a window or not), so a change to the checkpoint path cannot be told from the noise there. Here
the data clock is a :class:`~store.ManualClock` that advances one second per round, and the
rounds are paced on the wall clock (``pace_s``), so the background checkpoints run beside the
appends as in the service, and the measured rounds span several checkpoint cycles.

A SQLite store with background checkpoints and ``max_head_samples`` set so that the
out-of-order window alone is over it (as at 100 k series with the default 10 M): every
checkpoint is an early one. ``series`` series in ``targets`` appends per round (a scrape each),
half of them gauges with three decimals and half their canonical copies (the gauge x 0.01,
floats that take the XOR path), new values every round. Measured over ``measure`` rounds after
``warm`` (past the out-of-order window and the first early checkpoints): process CPU per
million samples appended (appends and checkpoints together), the checkpoints that ran, append
latency, RSS (at the end, and the largest of readings once a round) and the samples a checkpoint
slice held (:mod:`store.slice_sizes`); and the checkpoint thread's own CPU per million samples
it flushed (from ``/proc/self/task``), between the first and the last checkpoint that ended in
the measured rounds: whole cycles only. How many checkpoints end in the measured rounds varies (2 or 3),
which moves the first figure by a tenth or more, not the second. Printed per run and as the
median of ``repeats`` runs with the range; no target (the scrape benchmark's CPU target is end
to end). First, alone: the CPU time to encode 30,000 chunks of 75 such floats (what a
checkpoint's ``encode_segments`` does with them) and to decode them in one batch, median of 5,
and their bytes a sample; to encode 30,000 integer chunks of 75 GPU samples (utilisation,
power in W at mW resolution, energy in mJ; 1 s scrapes with a few ms of jitter), checked to
decode back; and the same for a packed head block (:mod:`store.head_packed`) of
30,000 series x 120 gauges with three decimals: packing it, decoding it whole and reading a
thirtieth of its series (what a rule's read does), and its bytes a sample; and the search for
each segment's decimals (:func:`store.codec_parts.decimals_per_segment`, which encoding and
packing both run) on 30,000 segments of 75 values, half arbitrary floats and half 3-decimal
gauges. Each run also
prints the head's bytes a sample (packed and plain blocks together), the median of readings
every 20 measured rounds: at any one moment it swings with how much of the head is still
plain (16 bytes a sample) between merges.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from benchmarks._common import energy_counter, mixed_fleet, power_walk, section, util_walk
from infermeter import db
from infermeter.thread_cpu import task_cpu_s
from store import ManualClock, SampleBatch, StoreOptions, TimeSeriesStore, create_store_engine
from store.batch_decode import decode_many
from store.codec import ENCODING, encode_segments
from store.codec_parts import decimals_per_segment
from store.head_blocks import _Block
from store.head_packed import PackedBlock
from store.memory import store_memory

OUT_OF_ORDER_S = 300  # the store's default window, in rounds of one second


def thread_cpu_s(native_id: int) -> float:
    """CPU seconds (user + system) of one thread of this process (Linux)."""
    seconds = task_cpu_s(native_id)
    if seconds is None:
        raise SystemExit(f"no CPU time for thread {native_id} in /proc (Linux only)")
    return seconds


@dataclass(frozen=True)
class PressureRun:
    cpu_per_m: float
    checkpoint_cpu_per_m: float  # the checkpoint thread's CPU per M samples flushed, whole cycles (0: under two)
    checkpoints: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    head_samples: int
    head_bytes_per_sample: float  # median of readings during the measured rounds
    rss_mib: float
    rss_max_mib: float  # the largest reading, once a round, over the measured rounds
    samples_per_slice: float  # what the measured rounds' checkpoints wrote, over the slices they wrote it in

    def line(self) -> str:
        return (f"  {self.cpu_per_m:5.2f} CPU-s per M samples; checkpoint thread {self.checkpoint_cpu_per_m:5.2f} "
                f"CPU-s per M flushed; {self.checkpoints} checkpoints; append p50 "
                f"{self.p50_ms:.1f} p99 {self.p99_ms:.1f} max {self.max_ms:.1f} ms; head {self.head_samples / 1e6:.1f} M "
                f"samples, {self.head_bytes_per_sample:.2f} B a sample (median); RSS {self.rss_mib:.0f} MiB at the end, "
                f"{self.rss_max_mib:.0f} MiB at most; {self.samples_per_slice:,.0f} samples a slice")


def run_pressure(path: Path, series: int, targets: int, warm: int, measure: int, pace_s: float) -> PressureRun:
    keys = mixed_fleet(series, 1, 0).keys
    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    start = 1_800_000_000_000 // 3_600_000 * 3_600_000
    clock = ManualClock(start)
    # The out-of-order window alone holds 1.8x this: every checkpoint is an early one.
    options = StoreOptions(background_checkpoints=True, max_head_samples=series * OUT_OF_ORDER_S * 10 // 18)
    store = TimeSeriesStore(engine, clock, options)
    store.open()
    try:
        ids = store.resolve(keys)
        rng = np.random.default_rng(1)
        per = series // targets
        latencies: list[float] = []
        cpu0 = checkpoints0 = 0.0
        flushed0 = slices0 = 0
        assert store.background is not None and store.background.native_id is not None
        thread_id = store.background.native_id
        ends: list[tuple[float, int]] = []  # (checkpoint thread CPU, samples flushed) as each checkpoint ended
        head_sizes: list[float] = []  # the head's bytes a sample, every 20 measured rounds
        rss_max = 0
        process = psutil.Process()
        next_at = time.perf_counter()
        for j in range(warm + measure):
            if j == warm:
                cpu0, checkpoints0 = time.process_time(), store.stats["checkpoints"]
                flushed0, slices0 = store.stats["flushed"], store.stats["checkpoint_slices"]
            now = time.perf_counter()
            if now < next_at:
                time.sleep(next_at - now)
            next_at += pace_s
            ts = start + j * 1000
            clock.set(ts)
            gauges = np.round(rng.uniform(0, 100, series - series // 2), 3)
            values = np.concatenate([gauges, gauges[: series // 2] * 0.01])
            for t in range(targets):
                lo, hi = t * per, series if t == targets - 1 else (t + 1) * per
                began = time.perf_counter()
                store.append(SampleBatch.one_per_key(keys[lo:hi], ts, values[lo:hi], ids[lo:hi]))
                if j >= warm:
                    latencies.append((time.perf_counter() - began) * 1000)
            if j >= warm:
                rss_max = max(rss_max, process.memory_info().rss)
            if j >= warm and store.stats["checkpoints"] > checkpoints0 + len(ends):
                ends.append((thread_cpu_s(thread_id), store.stats["flushed"]))
            if j >= warm and (j - warm) % 20 == 0:
                memory = store_memory(store)
                head_sizes.append((memory["head_samples"] + memory["head_samples_packed"]) / max(store.head.samples, 1))
        cpu = time.process_time() - cpu0
        (cpu_first, flushed_first), (cpu_last, flushed_last) = (ends[0], ends[-1]) if ends else ((0.0, 0), (0.0, 0))
        per_flushed = (cpu_last - cpu_first) / max(flushed_last - flushed_first, 1) * 1e6
        lat = np.asarray(latencies)
        return PressureRun(cpu / (measure * series) * 1e6, per_flushed,
                           int(store.stats["checkpoints"] - checkpoints0),
                           float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), float(lat.max()),
                           store.head.samples, statistics.median(head_sizes),
                           process.memory_info().rss / 2**20, rss_max / 2**20,
                           (store.stats["flushed"] - flushed0) / max(store.stats["checkpoint_slices"] - slices0, 1))
    finally:
        store.close(flush=False)
        engine.dispose()


def _float_chunks(chunks: int, samples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timestamps, values, starts) of ``chunks`` chunks of ``samples`` floats (gauges x 0.01)."""
    rng = np.random.default_rng(5)
    values = (np.round(rng.uniform(0, 100, chunks * samples), 3) * 0.01).astype(np.float64)
    ts = np.tile(np.arange(samples, dtype=np.int64) * 1000, chunks) + 1_800_000_000_000
    return ts, values, np.arange(chunks, dtype=np.int64) * samples


def _gpu_chunks(chunks: int, samples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timestamps, values, starts) of ``chunks`` chunks of ``samples`` GPU samples at 1 s with a
    few ms of jitter: a third utilisation steps, a third power in W (mW resolution), a third
    energy counters in mJ -- the integer chunks most of a checkpoint writes."""
    rng = np.random.default_rng(6)
    third = chunks // 3
    values = np.vstack([util_walk(rng, third, samples), power_walk(rng, third, samples),
                        energy_counter(rng, chunks - 2 * third, samples)])
    ts = 1_800_000_000_000 + np.arange(samples)[None, :] * 1000 + rng.integers(-3, 4, (chunks, samples))
    return ts.ravel().astype(np.int64), values.ravel().astype(np.float64), np.arange(chunks, dtype=np.int64) * samples


def chunk_encoding_s(chunks: tuple[np.ndarray, np.ndarray, np.ndarray], runs: int = 5) -> list[float]:
    """CPU seconds to encode ``chunks`` (timestamps, values, starts) in one call, per run; they
    must decode back bit for bit (checked once, untimed)."""
    ts, values, starts = chunks
    out = []
    for _ in range(runs):
        began = time.process_time()
        blobs = encode_segments(ts, values, starts)
        out.append(time.process_time() - began)
    got = decode_many(blobs, np.diff(np.append(starts, len(ts))).tolist(), [ENCODING] * len(blobs))
    if got.values.tobytes() != values.tobytes() or got.ts.tobytes() != ts.tobytes():
        raise SystemExit("chunks did not decode to the samples encoded")
    return out


def float_chunk_decoding_s(chunks: int = 30_000, samples: int = 75, runs: int = 5) -> tuple[list[float], float]:
    """CPU seconds to decode those chunks in one batch (as a range read does), per run, and
    their bytes a sample; the values must come back bit for bit."""
    ts, values, starts = _float_chunks(chunks, samples)
    blobs = encode_segments(ts, values, starts)
    out = []
    for _ in range(runs):
        began = time.process_time()
        got = decode_many(blobs, [samples] * chunks, [ENCODING] * chunks)
        out.append(time.process_time() - began)
        if got.values.tobytes() != values.tobytes():
            raise SystemExit("float chunks did not decode to the values encoded")
    return out, sum(map(len, blobs)) / len(values)


def decimals_search_s(segments: int = 30_000, samples: int = 75, runs: int = 5) -> list[float]:
    """CPU seconds per run of the search for each segment's decimals (chunk encoding and head
    packing both run it) on ``segments`` segments of ``samples`` values: every other one
    arbitrary floats (a ratio), the rest 3-decimal gauges as parsed from text."""
    rng = np.random.default_rng(7)
    floats = rng.normal(50, 10, (segments, samples))
    gauges = np.round(rng.uniform(0, 1000, (segments, samples)), 3)
    values = np.where((np.arange(segments) % 2 == 0)[:, None], floats, gauges).ravel()
    starts = np.arange(segments, dtype=np.int64) * samples
    expected = np.where(np.arange(segments) % 2 == 0, -1, 3)
    out = []
    for _ in range(runs):
        began = time.process_time()
        found = decimals_per_segment(values, starts)
        out.append(time.process_time() - began)
        if not np.array_equal(found, expected):
            raise SystemExit("the decimals search did not find the floats' none and the gauges' three")
    return out


def head_block_packing(series: int = 30_000, samples: int = 120, runs: int = 5) -> tuple[
        list[float], list[float], list[float], float]:
    """CPU seconds per run to pack a head block of ``series`` x ``samples`` gauges with three
    decimals (1 s scrapes, a few ms of jitter), to decode it whole, and to read a thirtieth of
    its series; and its bytes a sample. The values must come back bit for bit."""
    rng = np.random.default_rng(9)
    ts = 1_800_000_000_000 + np.arange(samples)[None, :] * 1000 + rng.integers(0, 6, (series, samples))
    values = np.round(rng.uniform(0, 100, (series, samples)), 3).ravel()
    block = _Block.of(np.repeat(np.arange(series, dtype=np.int64), samples), ts.ravel().astype(np.int64), values)
    some = np.arange(0, series, 30, dtype=np.int64)
    packing, decoding, reading = [], [], []
    packed = PackedBlock(block)
    for _ in range(runs):
        began = time.process_time()
        packed = PackedBlock(block)
        packing.append(time.process_time() - began)
        began = time.process_time()
        got = packed.run()[3]
        decoding.append(time.process_time() - began)
        began = time.process_time()
        packed.slices(some, 0, 2**62)
        reading.append(time.process_time() - began)
        if got.tobytes() != values.tobytes():
            raise SystemExit("the packed head block did not decode to the values packed")
    return packing, decoding, reading, packed.nbytes / len(values)


def _spread(figures: list[float], scale: float = 1.0, digits: int = 2) -> str:
    """``0.33 [0.33..0.83, median of 5]``: the median of ``figures`` (times ``scale``) and their range."""
    low, mid, high = min(figures) * scale, statistics.median(figures) * scale, max(figures) * scale
    return f"{mid:.{digits}f} [{low:.{digits}f}..{high:.{digits}f}, median of {len(figures)}]"


def bench_pressure(series: int, warm: int, measure: int, pace_s: float, repeats: int, tmp: Path) -> None:
    section("7. store CPU under memory pressure (early checkpoints), 1 s scrapes")
    print(f"{series:,} series in {series // 1000} appends a round, one round per {pace_s:.2f} s of wall time "
          f"(one second of data time), {warm} rounds of warm-up, {measure} measured; SQLite, background checkpoints")
    print(f"encoding 30,000 float chunks x 75 samples: {_spread(chunk_encoding_s(_float_chunks(30_000, 75)))} s")
    print(f"encoding 30,000 integer chunks x 75 GPU samples (utilisation, power, energy; 1 s, jittered): "
          f"{_spread(chunk_encoding_s(_gpu_chunks(30_000, 75)))} s")
    decoding, size = float_chunk_decoding_s()
    print(f"decoding them in one batch: {_spread(decoding)} s; {size:.3f} B a sample")
    print(f"the decimals search on 30,000 segments x 75 samples, half floats and half 3-decimal gauges: "
          f"{_spread(decimals_search_s(), 1e3, 1)} ms")
    packing, decoding, reading, head_size = head_block_packing()
    print(f"a head block of 30,000 series x 120 gauges: packed in {_spread(packing, 1e3, 0)} ms, decoded whole in "
          f"{_spread(decoding, 1e3, 0)} ms, a thirtieth of its series read in {_spread(reading, 1e3, 1)} ms; "
          f"{head_size:.3f} B a sample")
    runs = []
    for i in range(repeats):
        run = run_pressure(tmp / f"pressure-{i}.sqlite", series, max(1, series // 1000), warm, measure, pace_s)
        print(run.line(), flush=True)
        runs.append(run)
    for label, figures in (("store CPU per M samples appended", [r.cpu_per_m for r in runs]),
                           ("checkpoint thread CPU per M samples flushed", [r.checkpoint_cpu_per_m for r in runs])):
        print(f"{label}: {_spread(figures)}")
    print(f"RSS at most over the measured rounds: {_spread([r.rss_max_mib for r in runs], digits=0)} MiB")
