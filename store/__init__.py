"""The time-series store: an in-memory head over SQL write-ahead rows, chunks and rollups.

Public surface: :class:`TimeSeriesStore` (append, checkpoint, maintain), :class:`Reader`
(instant, raw, range, histogram_quantile), value types, and :func:`create_store_engine`.
Imports nothing else of the project.
"""

from store.clock import Clock, ManualClock, SystemClock
from store.engine import create_store_engine
from store.interfaces import Appender, SeriesReader
from store.options import StoreOptions
from store.reader import RangeQuery, RawSeries, Reader, SeriesResult
from store.series_index import Matcher, Selector
from store.tsdb import AppendResult, RejectReason, TimeSeriesStore
from store.types import STALE_NAN, Sample, SampleBatch, SeriesKey

__all__ = [
    "AppendResult",
    "Appender",
    "SeriesReader",
    "Clock",
    "ManualClock",
    "Matcher",
    "RangeQuery",
    "RawSeries",
    "Reader",
    "RejectReason",
    "STALE_NAN",
    "Sample",
    "SampleBatch",
    "Selector",
    "SeriesKey",
    "SeriesResult",
    "StoreOptions",
    "SystemClock",
    "TimeSeriesStore",
    "create_store_engine",
]
