"""The remote-write encoder (read back by our own receiver's decoder) and the durable queue:
what was put survives a reopen (a kill -9), a torn tail is cut off, a full queue drops its
oldest data and counts it, a corrupt record is skipped and counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from collector.remote_write.proto import encode_write_request, sample_count
from collector.remote_write.queue import HEADER, DiskQueue
from infermeter.api.remote_write import decode_remote_write
from store.types import SampleBatch, SeriesKey


def _batch(n: int, t0: int = 1_800_000_000_000) -> SampleBatch:
    keys = [SeriesKey.of("gpu_utilization_ratio", gpu=str(i), host="n1") for i in range(n)]
    index = np.repeat(np.arange(n, dtype=np.int64), 2)[::-1].copy()  # out of order on purpose
    ts = np.tile(np.asarray([t0 + 15_000, t0], np.int64), n)
    return SampleBatch(keys, index, ts, np.arange(2 * n, dtype=np.float64))


def test_encoded_request_round_trips_with_external_labels() -> None:
    batch = _batch(3)
    body = encode_write_request(batch, {"cluster": "c1", "node": "n1", "host": "ignored"})
    assert sample_count(body) == 6
    back = decode_remote_write(body, 1 << 20)
    got = {(k.canonical(), int(t), float(v)) for k, t, v in
           ((back.keys[i], t, v) for i, t, v in zip(back.key_index.tolist(), back.ts_ms.tolist(), back.values.tolist()))}
    want = set()
    for i, t, v in zip(batch.key_index.tolist(), batch.ts_ms.tolist(), batch.values.tolist()):
        key = batch.keys[i]
        labels = {"cluster": "c1", "node": "n1", **dict(key.labels)}  # the series' own host wins
        want.add((SeriesKey(key.name, tuple(sorted(labels.items()))).canonical(), int(t), float(v)))
    assert got == want
    # samples of one series are in time order (receivers reject out-of-order samples)
    per_series = {}
    for i, t in zip(back.key_index.tolist(), back.ts_ms.tolist()):
        per_series.setdefault(i, []).append(t)
    assert all(ts == sorted(ts) for ts in per_series.values())


def test_put_survives_reopen_and_acks_in_order(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path / "q")
    for i in range(5):
        queue.put(f"body-{i}".encode(), samples=10 + i, now_ms=1000 + i)
    first = queue.peek(2)
    assert [r.payload for r in first] == [b"body-0", b"body-1"] and first[0].put_ms == 1000
    queue.ack(first[0])
    reopened = DiskQueue(tmp_path / "q")  # as after a kill -9: nothing but the files
    assert [r.payload for r in reopened.peek(10)] == [b"body-1", b"body-2", b"body-3", b"body-4"]
    assert (reopened.stats.records, reopened.stats.samples) == (4, 11 + 12 + 13 + 14)
    for rec in reopened.peek(10):
        reopened.ack(rec)
    assert reopened.peek(1) == [] and reopened.stats.records == 0
    assert DiskQueue(tmp_path / "q").peek(1) == []


def test_torn_tail_is_cut_and_writing_goes_on(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path / "q")
    queue.put(b"whole", samples=1, now_ms=1)
    segment = sorted((tmp_path / "q").glob("*.seg"))[-1]
    with segment.open("ab") as fh:  # the process died halfway through the next record
        fh.write(HEADER.pack(100, 0, 5, 2) + b"only part")
    reopened = DiskQueue(tmp_path / "q")
    reopened.put(b"after", samples=2, now_ms=3)
    assert [r.payload for r in reopened.peek(10)] == [b"whole", b"after"]


def test_full_queue_drops_the_oldest_and_counts_it(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path / "q", max_bytes=256 * 1024, segment_bytes=64 * 1024)
    body = bytes(8 * 1024)
    for i in range(100):  # 800 KiB into a 256 KiB queue
        queue.put(body, samples=7, now_ms=i)
    stats = queue.stats
    assert stats.bytes <= 256 * 1024 + 64 * 1024
    assert stats.dropped_records > 0 and stats.dropped_samples == 7 * stats.dropped_records
    assert stats.records + stats.dropped_records == 100
    left = queue.peek(1000)
    assert len(left) == stats.records and left[-1].put_ms == 99  # the newest are kept
    assert left[0].put_ms == stats.dropped_records  # everything older went, nothing newer


def test_corrupt_record_is_skipped_and_counted(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path / "q")
    for i in range(3):
        queue.put(f"body-{i}".encode(), samples=1, now_ms=i)
    segment = sorted((tmp_path / "q").glob("*.seg"))[0]
    data = bytearray(segment.read_bytes())
    data[HEADER.size + 2] ^= 0xFF  # a flipped bit in the first payload
    segment.write_bytes(bytes(data))
    reopened = DiskQueue(tmp_path / "q")
    assert [r.payload for r in reopened.peek(10)] == [b"body-1", b"body-2"]
    assert reopened.stats.corrupt_records == 1


def test_a_corrupt_record_behind_undelivered_ones_waits_its_turn(tmp_path: Path) -> None:
    """The cursor never passes a body that was peeked but not yet acked."""
    queue = DiskQueue(tmp_path / "q")
    for i in range(3):
        queue.put(f"body-{i}".encode(), samples=1, now_ms=i)
    segment = sorted((tmp_path / "q").glob("*.seg"))[0]
    data = bytearray(segment.read_bytes())
    second = HEADER.size + len(b"body-0")
    data[second + HEADER.size + 1] ^= 0xFF  # corrupt the second payload
    segment.write_bytes(bytes(data))
    reopened = DiskQueue(tmp_path / "q")
    first = reopened.peek(10)
    assert [r.payload for r in first] == [b"body-0"] and reopened.stats.corrupt_records == 0
    assert [r.payload for r in DiskQueue(tmp_path / "q").peek(1)] == [b"body-0"]  # still undelivered
    reopened.ack(first[0])
    assert [r.payload for r in reopened.peek(10)] == [b"body-2"] and reopened.stats.corrupt_records == 1
