"""Decode pushed sample batches: JSON, or Prometheus text exposition.

JSON accepts two shapes (both may appear in one body)::

    {"samples": [{"metric": "gpu_util", "labels": {"gpu": "0"}, "ts": 1700000000000, "value": 42}]}
    {"series":  [{"metric": "gpu_util", "labels": {"gpu": "0"}, "samples": [[1700000000000, 42]]}]}

``ts`` is integer milliseconds (optional: the time of receipt); values may be numbers or the
strings "NaN", "+Inf", "-Inf". Any error rejects the whole body, naming the field or line.
"""

from __future__ import annotations

import gzip
import math
import zlib
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from collector.exposition import ParseError, SeriesCache, is_openmetrics_content_type, parse_exposition
from store.types import LABEL_NAME_RE, METRIC_NAME_RE, SampleBatch, SeriesKey

_SPECIAL = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}


class BadPayload(ValueError):
    """The body cannot be decoded; ``where`` names the field or line."""

    def __init__(self, where: str, message: str, status: int = 400) -> None:
        self.where = where
        self.message = message
        self.status = status
        super().__init__(f"{where}: {message}")


class BodyTooLarge(Exception):
    pass


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in _SPECIAL:
        return _SPECIAL[value.strip().lower()]
    raise ValueError("expected a number or one of NaN, +Inf, -Inf")


Number = Annotated[float, BeforeValidator(_number)]


def _timestamp(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("expected integer milliseconds since the epoch")
    if value < 0 or value > 2**53:
        raise ValueError("timestamp out of range")
    return int(value)


TimestampMs = Annotated[int, BeforeValidator(_timestamp)]


class _Labelled(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: str
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("metric")
    @classmethod
    def _metric(cls, name: str) -> str:
        if not METRIC_NAME_RE.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        return name

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for name in labels:
            if not LABEL_NAME_RE.match(name) or name == "__name__":
                raise ValueError(f"invalid label name {name!r}")
        return labels


class JsonSample(_Labelled):
    value: Number
    ts: TimestampMs | None = None


class JsonSeries(_Labelled):
    samples: list[tuple[TimestampMs, Number]]


class JsonBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    samples: list[JsonSample] = Field(default_factory=list)
    series: list[JsonSeries] = Field(default_factory=list)


def decode_json(body: bytes, now_ms: int) -> SampleBatch:
    try:
        batch = JsonBatch.model_validate_json(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(body)"
        message = err["msg"].removeprefix("Value error, ")
        extra = f" (and {exc.error_count() - 1} more errors)" if exc.error_count() > 1 else ""
        raise BadPayload(where, message + extra, 422) from exc
    index_of: dict[SeriesKey, int] = {}
    keys: list[SeriesKey] = []
    idx: list[int] = []
    ts: list[int] = []
    values: list[float] = []

    def position(metric: str, labels: dict[str, str]) -> int:
        key = SeriesKey(metric, tuple(labels.items()))
        at = index_of.get(key)
        if at is None:
            at = index_of[key] = len(keys)
            keys.append(key)
        return at

    for sample in batch.samples:
        idx.append(position(sample.metric, sample.labels))
        ts.append(now_ms if sample.ts is None else sample.ts)
        values.append(sample.value)
    for series in batch.series:
        at = position(series.metric, series.labels)
        for t, v in series.samples:
            idx.append(at)
            ts.append(t)
            values.append(v)
    return SampleBatch(keys, np.asarray(idx, np.int64), np.asarray(ts, np.int64), np.asarray(values, np.float64))


def decode_exposition(body: bytes, content_type: str | None, now_ms: int, cache: SeriesCache | None) -> SampleBatch:
    try:
        result = parse_exposition(
            body, default_ts_ms=now_ms, openmetrics=True if is_openmetrics_content_type(content_type) else None, cache=cache
        )
    except ParseError as exc:
        raise BadPayload(f"line {exc.line}", f"{exc.reason}: {exc.excerpt!r}") from exc
    return result.batch


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo Content-Encoding gzip/deflate, refusing to inflate past ``limit`` bytes."""
    if not encoding or encoding.strip().lower() == "identity":
        return body
    kind = encoding.strip().lower()
    if kind not in ("gzip", "deflate", "x-gzip"):
        raise BadPayload("Content-Encoding", f"unsupported encoding {encoding!r} (use gzip)", 415)
    wbits = 16 + zlib.MAX_WBITS if kind != "deflate" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise BadPayload("Content-Encoding", f"body is not valid {kind}: {exc}") from exc
    if len(out) > limit or inflater.unconsumed_tail:
        raise BodyTooLarge()
    return out
