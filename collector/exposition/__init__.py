"""Prometheus text / OpenMetrics exposition parsing for the collector."""

from collector.exposition.parser import (
    FamilyMeta,
    ParseError,
    ParseResult,
    SeriesCache,
    is_openmetrics_content_type,
    parse_exposition,
)

__all__ = [
    "FamilyMeta",
    "ParseError",
    "ParseResult",
    "SeriesCache",
    "is_openmetrics_content_type",
    "parse_exposition",
]
