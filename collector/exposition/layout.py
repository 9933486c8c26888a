"""A body's layout: when a target serves the same series in the same order scrape after scrape,
only the values need parsing (see :mod:`collector.exposition.parser`'s module doc)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from store.types import SampleBatch


class Layout:
    """A body's shape: its non-sample lines verbatim, each sample line's text before the value,
    and the parse result's keys (see the module doc)."""

    __slots__ = ("openmetrics_arg", "n_lines", "other", "other_chars", "get_other", "get_samples", "prefixes",
                 "prefix_chars", "keys", "key_index", "families", "openmetrics", "n")

    def __init__(self, lines: list[str], sample_lines: list[int], prefixes: list[str], batch: SampleBatch,
                 families: Mapping[str, Any], openmetrics: bool, openmetrics_arg: bool | None) -> None:
        self.openmetrics_arg = openmetrics_arg
        self.n_lines = len(lines)
        taken = set(sample_lines)
        other = [i for i in range(len(lines)) if i not in taken]
        self.get_other = _getter(other)
        self.other = self.get_other(lines)
        self.other_chars = sum(map(len, self.other))
        self.get_samples = _getter(sample_lines)
        self.prefixes = prefixes
        self.prefix_chars = sum(map(len, prefixes))
        self.keys = batch.keys
        self.key_index = np.asarray(batch.key_index, np.int64)
        self.key_index.flags.writeable = False
        self.families = dict(families)
        self.openmetrics = openmetrics
        self.n = len(sample_lines)

    @classmethod
    def build(cls, lines: list[str], sample_lines: list[int], batch: SampleBatch, families: Mapping[str, Any],
              openmetrics: bool, openmetrics_arg: bool | None) -> Layout | None:
        """The layout of a body just parsed, or None when its sample lines do not have the
        plain ``<series text><blank>value`` shape this fast path handles."""
        if not sample_lines:
            return None
        texts = [lines[i - 1] for i in sample_lines]  # sample_lines holds 1-based numbers
        prefixes = [t[: t.rfind(" ") + 1] for t in texts]
        if "" in prefixes:
            return None
        layout = cls(lines, [i - 1 for i in sample_lines], prefixes, batch, families, openmetrics, openmetrics_arg)
        values = layout._values(texts, sum(map(len, texts)))
        expected = np.asarray(batch.values, np.float64)
        if values is None or not np.array_equal(values.view(np.uint64), expected.view(np.uint64)):
            return None  # e.g. an exemplar or a timestamp after the value
        return layout

    def _values(self, texts: tuple[str, ...] | list[str], chars: int) -> npt.NDArray[np.float64] | None:
        """The values of sample lines ``texts`` (``chars`` characters in all), or None unless
        every line is its prefix followed by a plain value."""
        rests = cast(list[str], list(map(str.removeprefix, texts, self.prefixes)))
        joined = "".join(rests)
        # A line without its prefix comes back whole, so the lengths add up only when every
        # prefix was there; a space left means a timestamp or an exemplar after the value.
        if len(joined) != chars - self.prefix_chars or " " in joined:
            return None
        if "_" in joined or not joined.isascii():  # what float() takes but the grammar does not
            return None
        try:
            return np.fromiter(map(float, rests), np.float64, len(rests))
        except ValueError:
            return None

    def parse(self, text: str, default_ts_ms: int) -> tuple[SampleBatch, dict[str, Any], bool] | None:
        """(batch, families, openmetrics) of the body read through this layout, or None when it
        does not fit."""
        lines = text.split("\n")
        if len(lines) != self.n_lines or self.get_other(lines) != self.other:
            return None
        # the other lines are as before, so the sample lines hold the rest of the characters
        values = self._values(self.get_samples(lines), len(text) - (self.n_lines - 1) - self.other_chars)
        if values is None:
            return None
        batch = SampleBatch(self.keys, self.key_index, np.full(self.n, default_ts_ms, np.int64), values)
        return batch, dict(self.families), self.openmetrics


def _getter(indices: list[int]) -> Callable[[list[str]], tuple[str, ...]]:
    """``lines -> tuple(lines[i] for i in indices)`` in one C call."""
    if not indices:
        return lambda lines: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda lines: (lines[only],)
    return itemgetter(*indices)
