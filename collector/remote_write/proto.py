"""Prometheus remote-write 1.0 bodies: snappy-compressed protobuf ``WriteRequest``.

The message classes are built at first use from a descriptor written out here (the schema is
four tiny messages: WriteRequest -> TimeSeries -> Label, Sample), so no generated code or extra
package is needed beyond ``protobuf``; snappy's block format comes from ``cramjam``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import cramjam
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from store.types import SampleBatch

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


def encode_write_request(batch: SampleBatch, external: Mapping[str, str] | None = None) -> bytes:
    """A batch as a snappy-compressed WriteRequest: one TimeSeries per series with its samples in
    time order, labels sorted by name (the receivers require it), ``external`` labels added where
    a series does not carry them itself (as Prometheus's external_labels)."""
    request = write_request_class()()
    if not len(batch):
        return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))
    index = np.asarray(batch.key_index, np.int64)
    ts = np.asarray(batch.ts_ms, np.int64)
    values = np.asarray(batch.values, np.float64)
    order = np.lexsort((ts, index))
    index, ts, values = index[order], ts[order], values[order]
    bounds = np.flatnonzero(np.diff(index)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(index)]))
    extra = dict(external or {})
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        key = batch.keys[int(index[lo])]
        labels = {**extra, **dict(key.labels), "__name__": key.name}
        series = request.timeseries.add()
        for name in sorted(labels):
            series.labels.add(name=name, value=labels[name])
        for t, v in zip(ts[lo:hi].tolist(), values[lo:hi].tolist()):
            series.samples.add(value=v, timestamp=t)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def sample_count(body: bytes) -> int:
    """Samples in a compressed WriteRequest (the queue's bookkeeping)."""
    request = write_request_class()()
    request.ParseFromString(bytes(cramjam.snappy.decompress_raw(body)))
    return sum(len(series.samples) for series in request.timeseries)
