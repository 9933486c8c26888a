"""Chunks written in encoding 1 (before encoding 2 existed) still answer, next to new ones, from
the chunks table and from the cold tier, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from store import StoreOptions, TimeSeriesStore
from store.codec import ENCODING, decode, encode
from store.codec_v1 import ENCODING_V1
from tests.conftest import StoreFactory
from tests.store.test_cold_tier import END, answers, cold_options, fill


def rewrite_every_other_chunk_in_encoding_1(store: TimeSeriesStore) -> int:
    with store.engine.begin() as conn:
        rows = conn.execute(text("SELECT id, n, encoding, data FROM chunks ORDER BY id")).all()
        assert {int(r.encoding) for r in rows} == {ENCODING}, "a checkpoint writes the current encoding"
        old = rows[::2]
        for row in old:
            ts, values = decode(bytes(row.data), int(row.n), int(row.encoding))
            conn.execute(text("UPDATE chunks SET encoding = :e, data = :d WHERE id = :i"),
                         {"e": ENCODING_V1, "d": encode(ts, values, encoding=ENCODING_V1), "i": row.id})
    return len(old)


def test_chunks_of_both_encodings_answer_alike_hot_and_cold(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store(StoreOptions(chunk_cache_bytes=0))
    fill(store)
    before = answers(store)
    assert rewrite_every_other_chunk_in_encoding_1(store) > 10
    assert answers(store) == before
    cold = make_store(cold_options(tmp_path / "cold"))
    assert cold.tier_cold(END).chunks > 0
    assert answers(cold) == before
