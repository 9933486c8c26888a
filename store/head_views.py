"""Copies of head samples handed to readers, with the boundaries that tell them where the
head begins (``head_start``) and what is already in chunks (``flushed_until``)."""

from __future__ import annotations

from dataclasses import dataclass

from store.types import Float64Array, Int64Array


@dataclass(slots=True)
class HeadWindow:
    """Flat head samples of several series: series i owns ts[starts[i]:starts[i]+counts[i]]."""

    starts: Int64Array
    counts: Int64Array
    ts: Int64Array
    values: Float64Array
    head_start: Int64Array
    flushed_until: Int64Array


@dataclass(slots=True)
class HeadSnapshot:
    parts: list[tuple[int, Int64Array, Float64Array]]
    head_start: Int64Array
    flushed_until: Int64Array
