"""The time-series store: an in-memory head over SQL write-ahead rows, chunks and rollups.

Public surface: :class:`TimeSeriesStore` (append, checkpoint, maintain), :class:`Reader`
(instant, raw, range, histogram_quantile), value types, and :func:`create_store_engine`.
Imports nothing else of the project.

The names are loaded on first use (PEP 562): a process that needs only the value types (the
node agent) does not pay for SQLAlchemy and the store's machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.lazy import lazy_attributes

if TYPE_CHECKING:
    from store.clock import Clock, ManualClock, SystemClock
    from store.engine import create_store_engine
    from store.interfaces import Appender, SeriesReader
    from store.options import StoreOptions
    from store.reader import RangeQuery, RawSeries, Reader, SeriesResult
    from store.series_index import Matcher, Selector
    from store.tsdb import AppendResult, RejectReason, TimeSeriesStore
    from store.types import STALE_NAN, Sample, SampleBatch, SeriesKey

_WHERE = {
    "Clock": "store.clock", "ManualClock": "store.clock", "SystemClock": "store.clock",
    "create_store_engine": "store.engine",
    "Appender": "store.interfaces", "SeriesReader": "store.interfaces",
    "StoreOptions": "store.options",
    "RangeQuery": "store.reader", "RawSeries": "store.reader", "Reader": "store.reader", "SeriesResult": "store.reader",
    "Matcher": "store.series_index", "Selector": "store.series_index",
    "AppendResult": "store.tsdb", "RejectReason": "store.tsdb", "TimeSeriesStore": "store.tsdb",
    "STALE_NAN": "store.types", "Sample": "store.types", "SampleBatch": "store.types", "SeriesKey": "store.types",
}


__getattr__ = lazy_attributes('store', _WHERE, globals())


__all__ = [
    "AppendResult", "Appender", "Clock", "ManualClock", "Matcher", "RangeQuery", "RawSeries", "Reader",
    "RejectReason", "STALE_NAN", "Sample", "SampleBatch", "Selector", "SeriesKey", "SeriesReader", "SeriesResult",
    "StoreOptions", "SystemClock", "TimeSeriesStore", "create_store_engine",
]
