"""Prometheus remote-write 1.0 bodies: snappy-compressed protobuf ``WriteRequest``.

The message classes come from :mod:`collector.remote_write.proto` (the agent encodes with the
same schema). Only samples are read; exemplars, histograms and metadata fields are ignored.
"""

from __future__ import annotations

import cramjam
import numpy as np

from collector.remote_write.proto import write_request_class
from infermeter.api.ingest import BadPayload
from store.types import LABEL_NAME_RE, METRIC_NAME_RE, SampleBatch, SeriesKey


def decode_remote_write(body: bytes, limit: int) -> SampleBatch:
    """A snappy-compressed WriteRequest into a batch; errors name the series or the field."""
    try:
        raw = bytes(cramjam.snappy.decompress_raw(body))
    except Exception as exc:
        raise BadPayload("body", f"not snappy block data: {exc}") from exc
    if len(raw) > limit:
        raise BadPayload("body", f"decompressed body larger than the limit of {limit} bytes", 413)
    request = write_request_class()()
    try:
        request.ParseFromString(raw)
    except Exception as exc:
        raise BadPayload("body", f"not a remote-write WriteRequest: {exc}") from exc
    keys: list[SeriesKey] = []
    index: list[int] = []
    ts: list[int] = []
    values: list[float] = []
    for i, series in enumerate(request.timeseries):
        labels = {label.name: label.value for label in series.labels}
        name = labels.pop("__name__", "")
        if not METRIC_NAME_RE.match(name):
            raise BadPayload(f"timeseries.{i}", f"invalid or missing __name__ {name!r}", 422)
        for label in labels:
            if not LABEL_NAME_RE.match(label):
                raise BadPayload(f"timeseries.{i}.labels", f"invalid label name {label!r}", 422)
        keys.append(SeriesKey(name, tuple(labels.items())))
        for sample in series.samples:
            index.append(len(keys) - 1)
            ts.append(int(sample.timestamp))
            values.append(float(sample.value))
    return SampleBatch(keys, np.asarray(index, np.int64), np.asarray(ts, np.int64), np.asarray(values, np.float64))
