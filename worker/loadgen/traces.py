"""Request traces to replay: arrival times and token counts.

Formats (see ``shared/data/traces/SOURCES.md``):

* Azure LLM inference trace CSV -- header ``TIMESTAMP,ContextTokens,GeneratedTokens``, timestamps
  like ``2023-11-16 18:17:03.9799600`` (7 fractional digits).  Arrival = seconds since the first.
* Mooncake JSONL -- one object a line: ``timestamp`` (ms since the trace start),
  ``input_length``, ``output_length``, ``hash_ids`` (ids of 512-token prompt blocks; equal ids
  mean a shared prefix, which the replay reproduces as equal prompt text).

Problems are data: a bad line is skipped and counted with its line number in ``skipped``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

TraceFormat = Literal["auto", "azure", "mooncake"]


@dataclass(frozen=True)
class TraceRecord:
    at_s: float  # arrival, seconds since the trace start
    prompt_tokens: int
    output_tokens: int
    blocks: tuple[int, ...] = ()  # Mooncake hash_ids


@dataclass
class Trace:
    records: list[TraceRecord]
    source: str
    skipped: list[str] = field(default_factory=list)

    @property
    def span_s(self) -> float:
        return self.records[-1].at_s - self.records[0].at_s if self.records else 0.0


def _parse_azure_time(text: str) -> datetime:
    text = text.strip()
    if "." in text:  # Python parses at most 6 fractional digits
        head, frac = text.split(".", 1)
        text = f"{head}.{frac[:6]}"
    return datetime.fromisoformat(text)


def read_azure_csv(path: str | Path) -> Trace:
    records: list[TraceRecord] = []
    skipped: list[str] = []
    start: datetime | None = None
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: not an Azure LLM trace CSV (missing columns {', '.join(sorted(missing))})")
        for lineno, row in enumerate(reader, start=2):
            try:
                ts = _parse_azure_time(row["TIMESTAMP"])
                prompt, output = int(row["ContextTokens"]), int(row["GeneratedTokens"])
            except (ValueError, TypeError) as exc:
                skipped.append(f"{path}:{lineno}: {exc}")
                continue
            start = ts if start is None else start
            records.append(TraceRecord((ts - start).total_seconds(), max(1, prompt), max(1, output)))
    records.sort(key=lambda r: r.at_s)
    return Trace(records, str(path), skipped)


def read_mooncake_jsonl(path: str | Path) -> Trace:
    records: list[TraceRecord] = []
    skipped: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                rec = TraceRecord(
                    float(obj["timestamp"]) / 1000.0,
                    max(1, int(obj["input_length"])),
                    max(1, int(obj["output_length"])),
                    tuple(int(h) for h in obj.get("hash_ids", ())),
                )
            except (ValueError, TypeError, KeyError) as exc:
                skipped.append(f"{path}:{lineno}: {type(exc).__name__}: {exc}")
                continue
            records.append(rec)
    if records:
        t0 = min(r.at_s for r in records)
        records = sorted((TraceRecord(r.at_s - t0, r.prompt_tokens, r.output_tokens, r.blocks) for r in records),
                         key=lambda r: r.at_s)
    return Trace(records, str(path), skipped)


def detect_format(path: str | Path) -> Literal["azure", "mooncake"]:
    with open(path, encoding="utf-8") as fh:
        first = fh.readline().strip()
    if first.startswith("{"):
        return "mooncake"
    if "TIMESTAMP" in first:
        return "azure"
    raise ValueError(f"{path}: cannot tell the trace format (expected an Azure CSV header or JSON lines)")


def read_trace(path: str | Path, fmt: TraceFormat = "auto") -> Trace:
    kind = detect_format(path) if fmt == "auto" else fmt
    return read_azure_csv(path) if kind == "azure" else read_mooncake_jsonl(path)
