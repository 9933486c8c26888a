"""Prometheus remote-write 1.0 bodies: snappy-compressed protobuf ``WriteRequest``.

The message classes are built at first use from a descriptor written out here (the schema is
four tiny messages: WriteRequest -> TimeSeries -> Label, Sample), so no generated code or extra
package is needed beyond ``protobuf``; snappy's block format comes from ``cramjam``.
Only samples are read; exemplars, histograms and metadata fields are ignored.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import cramjam
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from infermeter.api.ingest import BadPayload
from store.types import LABEL_NAME_RE, METRIC_NAME_RE, SampleBatch, SeriesKey

_F = descriptor_pb2.FieldDescriptorProto


@cache
def write_request_class() -> Any:
    """The ``prometheus.WriteRequest`` message class (remote-write 1.0 field numbers)."""
    proto = descriptor_pb2.FileDescriptorProto(name="infermeter_remote_write.proto", package="prometheus")

    def message(name: str, fields: list[tuple[str, int, int, int, str]]) -> None:
        msg = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = msg.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name

    optional, repeated = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    message("Label", [("name", 1, _F.TYPE_STRING, optional, ""), ("value", 2, _F.TYPE_STRING, optional, "")])
    message("Sample", [("value", 1, _F.TYPE_DOUBLE, optional, ""), ("timestamp", 2, _F.TYPE_INT64, optional, "")])
    message(
        "TimeSeries",
        [
            ("labels", 1, _F.TYPE_MESSAGE, repeated, ".prometheus.Label"),
            ("samples", 2, _F.TYPE_MESSAGE, repeated, ".prometheus.Sample"),
        ],
    )
    message("WriteRequest", [("timeseries", 1, _F.TYPE_MESSAGE, repeated, ".prometheus.TimeSeries")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("prometheus.WriteRequest"))


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
