"""The narrow interfaces other stages depend on; :class:`store.TimeSeriesStore` and
:class:`store.Reader` implement them, and tests may hand in anything else that does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from store.types import Int64Array, SampleBatch, SeriesKey

if TYPE_CHECKING:
    from store.reader import FlatSamples, RangeQuery, RawSeries, SeriesResult
    from store.series_index import Selector
    from store.tsdb import AppendResult


class SampleSink(Protocol):
    def append(self, batch: SampleBatch) -> AppendResult:
        """Take a batch; returns only once the accepted samples cannot be lost by a crash."""
        ...


class SampleStore(SampleSink, Protocol):
    """What the runtime writes samples to and runs: the embedded :class:`store.TimeSeriesStore`
    or a remote engine's queue (:class:`remote.RemoteSampleStore`)."""

    def open(self) -> None: ...

    def close(self, flush: bool = True) -> None: ...

    def maintain(self) -> None: ...


class Appender(Protocol):
    def append(self, batch: SampleBatch) -> AppendResult:
        """Store a batch; returns only once the accepted samples are durable."""
        ...

    def resolve(self, keys: Sequence[SeriesKey]) -> Int64Array:
        """Ids for ``keys`` (creating new series) that later batches may carry as ``key_ids``."""
        ...


class SeriesReader(Protocol):
    """What rules, the cost ledger, the dashboard and reports read samples through: the
    embedded :class:`store.Reader` on one node, :class:`remote.RemoteReader` over an engine."""

    def select(self, selector: Selector) -> list[tuple[int, SeriesKey]]: ...

    def active(self, selector: Selector, start_ms: int, end_ms: int) -> list[tuple[int, SeriesKey]]: ...

    def range(self, query: RangeQuery) -> list[SeriesResult]: ...

    def raw(self, selector: Selector, start_ms: int, end_ms: int) -> list[RawSeries]: ...

    def raw_flat(self, selector: Selector, start_ms: int, end_ms: int) -> FlatSamples: ...

    def instant(self, selector: Selector, at_ms: int, lookback_ms: int = 300_000) -> list[tuple[SeriesKey, int, float]]: ...

    def histogram_quantile(
        self, q: float, bucket_selector: Selector, start_ms: int, end_ms: int, step_ms: int, by: tuple[str, ...] = ()
    ) -> list[SeriesResult]: ...
