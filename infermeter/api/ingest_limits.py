"""Pushes checked against :class:`~infermeter.settings_limits.IngestLimits` before anything is
stored: a push over a limit is refused whole with a 422 that names the series and the limit."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.api.ingest import BadPayload
from infermeter.settings_limits import IngestLimits
from store.types import SampleBatch, SeriesKey


def _where(key: SeriesKey) -> str:
    text = key.canonical()
    return f"series {text[:120]}" + ("..." if len(text) > 120 else "")


def check_batch(batch: SampleBatch, new: Sequence[SeriesKey], limits: IngestLimits) -> None:
    """Raise BadPayload (422) for a request with too many series, or naming the first series of
    ``new`` (those the store would create) over a label limit."""
    if len(batch.keys) > limits.max_series_per_request:
        raise BadPayload("body", f"{len(batch.keys)} series in one request exceed the limit of "
                         f"{limits.max_series_per_request} (server.ingest.max_series_per_request)", 422)
    most_labels = limits.max_labels_per_series - 1  # the metric name is a label too
    longest_name, longest_value = limits.max_label_name_length, limits.max_label_value_length
    for key in new:
        labels = key.labels
        if len(labels) > most_labels:
            raise BadPayload(_where(key), f"{len(labels) + 1} labels exceed the limit of "
                             f"{limits.max_labels_per_series} (server.ingest.max_labels_per_series)", 422)
        if len(key.name) > longest_value:
            raise BadPayload(_where(key), f"metric name of {len(key.name)} characters exceeds the limit of "
                             f"{longest_value} (server.ingest.max_label_value_length)", 422)
        for name, value in labels:
            if len(name) > longest_name:
                raise BadPayload(_where(key), f"label name {name[:40]!r}... of {len(name)} characters exceeds the "
                                 f"limit of {longest_name} (server.ingest.max_label_name_length)", 422)
            if len(value) > longest_value:
                raise BadPayload(_where(key), f"value of label {name!r} has {len(value)} characters, over the "
                                 f"limit of {longest_value} (server.ingest.max_label_value_length)", 422)
