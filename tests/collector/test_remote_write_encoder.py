"""The hand-written remote-write encoder against the protobuf library's decoder: every series
with its labels (external ones added where missing, sorted by name) and its samples in time
order, bit for bit (staleness markers included), for awkward batches too."""

from __future__ import annotations

import struct

import cramjam
import numpy as np
import pytest

from collector.remote_write.encoder import WriteRequestEncoder, varint
from collector.remote_write.proto import write_request_class
from store.types import STALE_NAN, SampleBatch, SeriesKey


def _decode(body: bytes) -> dict[tuple[tuple[str, str], ...], list[tuple[int, bytes]]]:
    request = write_request_class()()
    request.ParseFromString(bytes(cramjam.snappy.decompress_raw(body)))
    out = {}
    for series in request.timeseries:
        labels = tuple((label.name, label.value) for label in series.labels)
        assert list(labels) == sorted(labels), labels
        assert labels not in out
        out[labels] = [(s.timestamp, struct.pack("<d", s.value)) for s in series.samples]
    return out


def _expected(batch: SampleBatch, external: dict[str, str]) -> dict[tuple[tuple[str, str], ...], list[tuple[int, bytes]]]:
    out: dict[tuple[tuple[str, str], ...], list[tuple[int, bytes]]] = {}
    for k, t, v in zip(batch.key_index.tolist(), batch.ts_ms.tolist(), batch.values.tolist()):
        key = batch.keys[k]
        labels = tuple(sorted({**external, **dict(key.labels), "__name__": key.name}.items()))
        out.setdefault(labels, []).append((t, struct.pack("<d", v)))
    return {labels: sorted(samples, key=lambda s: s[0]) for labels, samples in out.items()}


def test_a_scrape_shaped_batch_round_trips() -> None:
    keys = [SeriesKey.of("gpu_utilization_ratio", {"gpu": str(i), "host": "n1"}) for i in range(50)]
    batch = SampleBatch(keys, np.arange(50), np.full(50, 1_800_000_000_000, np.int64), np.linspace(0, 1, 50))
    external = {"cluster": "c1", "host": "ignored-the-series-has-one"}
    assert _decode(WriteRequestEncoder(external).encode(batch)) == _expected(batch, external)


@pytest.mark.parametrize("seed", range(5))
def test_awkward_batches_round_trip(seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = [SeriesKey.of("métrique_total", {"naïve": "värde ✓", "i": str(i)}) for i in range(7)] + [SeriesKey("bare")]
    n = 200
    index = rng.integers(0, len(keys), n)
    # mixed varint widths: zero, small, negative, present-day and far-future timestamps
    ts = rng.choice(np.asarray([0, 1, 127, 128, -5, 1_800_000_000_000, 2**62], np.int64), n) + rng.integers(0, 3, n)
    values = rng.normal(size=n)
    values[::17] = STALE_NAN
    values[::23] = 0.0
    values[::29] = -np.inf
    batch = SampleBatch(keys, index, ts, values)
    encoder = WriteRequestEncoder({"cluster": "c"})
    got = _decode(encoder.encode(batch))
    assert got == _expected(batch, {"cluster": "c"})
    assert _decode(encoder.encode(batch)) == got  # label bytes from the cache: the same body


def test_varint_matches_protobuf() -> None:
    for value in (0, 1, 127, 128, 300, 2**35, 2**63 - 1, -1, -(2**63)):
        request = write_request_class()()
        request.timeseries.add().samples.add(timestamp=value, value=1.0)
        assert varint(value) in request.SerializeToString()
    assert varint(300) == b"\xac\x02" and len(varint(-1)) == 10


def test_an_empty_batch_is_an_empty_request() -> None:
    assert _decode(WriteRequestEncoder().encode(SampleBatch.empty())) == {}


def test_series_with_many_samples_out_of_order_round_trip() -> None:
    keys = [SeriesKey.of("inference_requests_total", {"model": m}) for m in ("a", "b", "c")]
    rng = np.random.default_rng(9)
    index = rng.integers(0, 3, 300)
    ts = 1_800_000_000_000 + rng.permutation(300).astype(np.int64) * 15_000  # one varint width, shuffled
    batch = SampleBatch(keys, index, ts, rng.random(300))
    assert _decode(WriteRequestEncoder().encode(batch)) == _expected(batch, {})


def test_a_reused_key_list_encodes_each_scrape_right() -> None:
    keys = [SeriesKey.of("gpu_temperature_celsius", {"gpu": str(i)}) for i in range(40)]
    encoder = WriteRequestEncoder({"node": "n1"}, reused_key_lists=True)
    for scrape in range(3):  # the same list object every scrape, new values and times
        batch = SampleBatch(keys, np.arange(40), np.full(40, 1_800_000_000_000 + 15_000 * scrape, np.int64),
                            np.arange(40, dtype=np.float64) + scrape)
        assert _decode(encoder.encode(batch)) == _expected(batch, {"node": "n1"})
    other = list(reversed(keys))  # another list: its own heads
    batch = SampleBatch(other, np.arange(40), np.full(40, 1_800_000_000_000, np.int64), np.zeros(40))
    assert _decode(encoder.encode(batch)) == _expected(batch, {"node": "n1"})
