"""Write-ahead payloads: version 2 (delta + LZ4) round-trips every bit, is a fraction of the raw
columns' size, and version 1 rows of earlier releases still decode and replay."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from sqlalchemy import text

from store import STALE_NAN, Reader, Selector, SeriesKey
from store.wal import WalDecodeError, decode_wal, encode_wal
from tests.conftest import T0, StoreFactory


def _v1(sid: np.ndarray, ts: np.ndarray, val: np.ndarray) -> bytes:
    """A version 1 payload, as earlier releases wrote it: header, then the three raw columns."""
    return (struct.pack("<4sI", b"IMW1", len(sid)) + sid.astype("<i8").tobytes() + ts.astype("<i8").tobytes()
            + val.astype("<f8").tobytes())


def _bits(a: np.ndarray) -> list[int]:
    return [int(b) for b in np.asarray(a, np.float64).view(np.uint64)]


def test_round_trip_keeps_every_bit_and_any_order() -> None:
    sid = np.asarray([3, 3, 7, 2**40, 5], np.int64)  # not sorted: differences go negative
    ts = np.asarray([T0, T0 - 5, 2**62, 0, -(2**62)], np.int64)
    val = np.asarray([1.5, -0.0, float("nan"), float("inf"), 0.1], np.float64)
    val[2] = STALE_NAN
    got = decode_wal(encode_wal(sid, ts, val))
    assert got[0].tolist() == sid.tolist() and got[1].tolist() == ts.tolist()
    assert _bits(got[2]) == _bits(val)
    empty = decode_wal(encode_wal(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)))
    assert [len(c) for c in empty] == [0, 0, 0]


def test_a_scrape_shaped_batch_is_under_a_quarter_of_the_raw_columns() -> None:
    n = 100_000
    rng = np.random.default_rng(3)
    sid = np.arange(1, n + 1, dtype=np.int64)
    ts = np.full(n, T0, np.int64)
    val = np.round(300 + rng.normal(0, 40, n), 3)  # board power in W at mW resolution
    payload = encode_wal(sid, ts, val)
    assert len(payload) < 0.25 * 24 * n
    assert _bits(decode_wal(payload)[2]) == _bits(val)


def test_corrupt_version_2_rows_raise_typed_errors() -> None:
    payload = encode_wal(np.arange(50, dtype=np.int64), np.arange(50, dtype=np.int64), np.ones(50))
    with pytest.raises(WalDecodeError, match="truncated"):
        decode_wal(payload[:5])
    with pytest.raises(WalDecodeError, match="decompress"):
        decode_wal(payload[:8] + b"\xff" * 12)
    with pytest.raises(WalDecodeError, match="corrupt"):  # the header claims more samples than the body holds
        decode_wal(payload[:4] + struct.pack("<I", 51) + payload[8:])


def test_version_1_rows_decode() -> None:
    sid, ts, val = np.asarray([1, 2], np.int64), np.asarray([T0, T0], np.int64), np.asarray([0.5, 2.0])
    got = decode_wal(_v1(sid, ts, val))
    assert got[0].tolist() == [1, 2] and got[1].tolist() == [T0, T0] and got[2].tolist() == [0.5, 2.0]


def test_a_version_1_row_left_by_an_earlier_release_is_replayed(make_store: StoreFactory) -> None:
    store = make_store()
    key = SeriesKey.of("gpu_util", gpu="0")
    (sid,) = store.resolve([key]).tolist()
    payload = _v1(np.asarray([sid, sid], np.int64), np.asarray([T0, T0 + 15_000], np.int64), np.asarray([10.0, 11.0]))
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO wal (created_ms, n, payload) VALUES (:c, 2, :p)"), {"c": T0, "p": payload})
    store.close(flush=False)
    reopened = make_store()
    (series,) = Reader(reopened).raw(Selector("gpu_util"), T0 - 1, T0 + 60_000)
    assert series.ts_ms.tolist() == [T0, T0 + 15_000] and series.values.tolist() == [10.0, 11.0]
    reopened.checkpoint(force=True)
    with reopened.engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM wal")).scalar_one() == 0
