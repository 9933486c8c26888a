"""The bytes benchmark's real-trace part reads traces in the public formats (own small fixtures
here), builds scrape-shaped counters from them, and is skipped with a line when they are absent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.store_trace_series import report_trace_series, trace_series


def write_traces(root: Path) -> None:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(60):  # a request every 20 s with an idle stretch in the middle
        if not 20 <= i < 35:
            lines.append(f"2023-11-16 18:{15 + i * 20 // 60:02d}:{i * 20 % 60:02d}.1234567,{100 + i},{10 + i}")
    (root / "AzureLLMInferenceTrace_code.csv").write_text("\n".join(lines) + "\n")
    rows = [{"timestamp": i * 7_000, "input_length": 500 + i, "output_length": 50, "hash_ids": [i]} for i in range(80)]
    (root / "mooncake_conversation_trace.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_counters_from_the_traces(tmp_path: Path) -> None:
    write_traces(tmp_path)
    series = trace_series(tmp_path)
    assert {"azure-code requests_total", "mooncake generation_tokens_total"} <= set(series)
    requests = series["azure-code requests_total"]
    assert np.all(np.diff(requests) >= 0) and requests[-1] == 44  # a counter of the requests seen so far
    assert np.any(np.diff(requests) == 0)  # the idle stretch stays flat
    assert series["mooncake generation_tokens_total"][-1] == 50 * np.searchsorted(
        np.arange(80) * 7.0, np.arange(0.0, 79 * 7.0, 15.0)[-1], side="right")


def test_the_report_prints_both_encodings_or_skips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report_trace_series(tmp_path / "missing")
    assert "SKIP (no traces in" in capsys.readouterr().out
    write_traces(tmp_path)
    report_trace_series(tmp_path)
    out = capsys.readouterr().out
    assert "enc 1" in out and "azure-code requests_total" in out and out.strip().splitlines()[-1].lstrip().startswith("all")
