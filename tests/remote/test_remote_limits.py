"""The remote backend's writer rejects samples from the future as the embedded store does, and
queues the rest (read back from its disk queue)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from remote import RemoteSampleStore
from store.append_result import RejectReason
from store.clock import ManualClock
from store.types import SampleBatch, SeriesKey

T0 = 1_764_000_000_000


def test_samples_from_the_future_are_rejected_and_the_rest_queued(tmp_path: Path) -> None:
    store = RemoteSampleStore("http://127.0.0.1:9/api/v1/write", tmp_path / "queue", ManualClock(T0),
                              max_future_ms=600_000)
    keys = [SeriesKey.of("m", i=str(i)) for i in range(3)]
    batch = SampleBatch(keys, np.array([0, 1, 2, 1]), np.array([T0, T0 + 3_600_000, T0 + 599_000, T0 + 1]),
                        np.ones(4))
    result = store.append(batch)
    assert result.accepted == 3 and result.rejected == {RejectReason.TOO_NEW: 1}
    assert store.samples_enqueued == 3
    only_future = SampleBatch(keys[:1], np.array([0]), np.array([T0 + 10 * 3_600_000]), np.ones(1))
    assert store.append(only_future).rejected == {RejectReason.TOO_NEW: 1} and store.samples_enqueued == 3


def test_selecting_samples_keeps_only_the_keys_they_use() -> None:
    keys = [SeriesKey.of("m", i=str(i)) for i in range(3)]
    batch = SampleBatch(keys, np.array([2, 0, 2, 1]), np.array([1, 2, 3, 4]), np.array([1.0, 2.0, 3.0, 4.0]),
                        key_ids=np.array([10, 11, 12]))
    picked = batch.select(np.array([True, False, True, False]))
    assert picked.keys == [keys[2]] and picked.key_index.tolist() == [0, 0]
    assert picked.ts_ms.tolist() == [1, 3] and picked.values.tolist() == [1.0, 3.0]
    assert picked.key_ids is not None and picked.key_ids.tolist() == [12]
