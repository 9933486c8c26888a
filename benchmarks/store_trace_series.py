"""Part of ``store_bench``'s bytes section: chunk bytes per sample of series derived from the
public request traces beside the checkout (``../shared/data/traces``, read in place, never
copied): what vLLM-shaped counters and a running-requests gauge of those services would store,
scraped every 15 s, in chunk encoding 1 and encoding 2, with regular timestamps and with ±3 ms of
scrape jitter. Skipped when the traces are not there."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path

import numpy as np

from store.codec import ENCODING, encode
from store.codec_v1 import ENCODING_V1

TRACES = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "traces"
SCRAPE_S = 15.0
CHUNK = 480  # 2 h of 15 s scrapes


def _counters(name: str, times_s: np.ndarray, prompt: np.ndarray, output: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    order = np.argsort(times_s)
    times_s, prompt, output = times_s[order], prompt[order], output[order]
    scrapes = np.arange(times_s[0], times_s[-1], SCRAPE_S)
    done = np.searchsorted(times_s, scrapes, side="right")  # requests seen by each scrape
    per_scrape = np.diff(np.concatenate(([0], done)))
    seconds = np.random.default_rng(seed).gamma(2.0, 1.3, len(scrapes)) * per_scrape  # an e2e-latency sum
    return {
        f"{name} prompt_tokens_total": np.concatenate(([0], np.cumsum(prompt)))[done].astype(np.float64),
        f"{name} generation_tokens_total": np.concatenate(([0], np.cumsum(output)))[done].astype(np.float64),
        f"{name} requests_total": done.astype(np.float64),
        f"{name} e2e_request_latency_seconds_sum": np.cumsum(seconds),
        f"{name} num_requests_running": np.convolve(per_scrape, np.ones(8), "same").astype(np.float64),
    }


def trace_series(traces: Path = TRACES) -> dict[str, np.ndarray]:
    series: dict[str, np.ndarray] = {}
    for seed, name in enumerate(("code", "conv")):
        path = traces / f"AzureLLMInferenceTrace_{name}.csv"
        if not path.exists():
            continue
        with path.open() as handle:
            rows = list(csv.DictReader(handle))
        times = np.array([datetime.fromisoformat(r["TIMESTAMP"][:26]).timestamp() for r in rows])
        series |= _counters(f"azure-{name}", times, np.array([int(r["ContextTokens"]) for r in rows]),
                            np.array([int(r["GeneratedTokens"]) for r in rows]), seed)
    path = traces / "mooncake_conversation_trace.jsonl"
    if path.exists():
        with path.open() as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        series |= _counters("mooncake", np.array([r["timestamp"] for r in rows]) / 1000.0,
                            np.array([r["input_length"] for r in rows]), np.array([r["output_length"] for r in rows]), 2)
    return series


def _bytes(ts: np.ndarray, values: np.ndarray, encoding: int) -> int:
    return sum(len(encode(ts[s : s + CHUNK], values[s : s + CHUNK], encoding=encoding)) for s in range(0, len(ts), CHUNK))


def report_trace_series(traces: Path = TRACES) -> None:
    series = trace_series(traces)
    if not series:
        print(f"series from real request traces: SKIP (no traces in {traces})")
        return
    rng = np.random.default_rng(0)
    print(f"series from real request traces ({traces}), 15 s scrapes, chunks of {CHUNK} samples, B/sample:")
    print(f"  {'series':52} {'samples':>7}  {'enc 1':>6} {'enc 2':>6}   {'±3 ms: enc 1':>12} {'enc 2':>6}")
    totals = np.zeros(4)
    samples = 0
    for name, values in series.items():
        regular = 1_700_000_000_000 + np.arange(len(values), dtype=np.int64) * int(SCRAPE_S * 1000)
        jittered = regular + rng.integers(-3, 4, len(values))
        sizes = np.array([_bytes(ts, values, enc) for ts in (regular, jittered) for enc in (ENCODING_V1, ENCODING)])
        totals += sizes
        samples += len(values)
        per = sizes / len(values)
        print(f"  {name:52} {len(values):7,}  {per[0]:6.2f} {per[1]:6.2f}   {per[2]:12.2f} {per[3]:6.2f}")
    per = totals / samples
    print(f"  {'all':52} {samples:7,}  {per[0]:6.2f} {per[1]:6.2f}   {per[2]:12.2f} {per[3]:6.2f}  (no target: a check on real shapes)")
