"""Prometheus remote-write 1.0 bodies: snappy-compressed protobuf ``WriteRequest``.

Decoding (the receiver, ``/api/v1/write``) uses message classes built at first use from a
descriptor written out here (the schema is four tiny messages: WriteRequest -> TimeSeries ->
Label, Sample), so no generated code is needed beyond ``protobuf``; encoding writes the wire
format directly (:mod:`collector.remote_write.encoder`). Snappy's block format comes from ``cramjam``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import cramjam
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from collector.remote_write.encoder import WriteRequestEncoder
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
    """A batch as a snappy-compressed WriteRequest (see :class:`WriteRequestEncoder`, which
    senders keep so that each series' label bytes are built once)."""
    return WriteRequestEncoder(external).encode(batch)


def sample_count(body: bytes) -> int:
    """Samples in a compressed WriteRequest (the queue's bookkeeping)."""
    request = write_request_class()()
    request.ParseFromString(bytes(cramjam.snappy.decompress_raw(body)))
    return sum(len(series.samples) for series in request.timeseries)
