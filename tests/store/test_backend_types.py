"""PostgreSQL's binary COPY types come from the schema's column types (store.backend)."""

from __future__ import annotations

import pytest

from store import backend, schema
from store.backend import CHUNK_COLUMNS, backend_for
from store.rollup_spans import SPAN_COLUMNS


def test_copy_types_follow_the_schema() -> None:
    assert [backend._pg_type("chunks", c) for c in CHUNK_COLUMNS] == ["int8", "int8", "int8", "int4", "int2", "bytea"]
    assert [backend._pg_type("rollup_spans", c) for c in SPAN_COLUMNS] == ["int4", "int8", "int8", "int8", "int4", "bytea"]


def test_a_column_without_a_copy_type_is_named() -> None:
    with pytest.raises(TypeError, match=r"series\.labels: no binary COPY type"):
        backend._pg_type("series", "labels")
    with pytest.raises(KeyError):
        backend._pg_type("no_such_table", "n")
    assert "labels" in schema.series.c


def test_an_unknown_dialect_is_named() -> None:
    with pytest.raises(ValueError, match=r"unsupported database dialect 'mysql'"):
        backend_for("mysql")
