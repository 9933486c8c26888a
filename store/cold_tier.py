"""The cold tier: chunks older than ``cold_after`` move to Parquet files on a local directory
or any fsspec URL (``s3://bucket/prefix`` with s3fs installed), and reads of old ranges find
them there.

A move (:func:`move_to_cold`) reads the oldest chunk rows, writes them as one Parquet file
(the chunk blobs as they are -- already compressed -- plus their ids, series, bounds and
counts), and only then, in one transaction, records the file in ``cold_files`` and deletes
those rows from ``chunks``. A crash before the commit leaves a file nothing names (ignored,
swept at the next move); after it, the chunks are in the file alone. A chunk keeps its id, so
the decoded-chunk cache stays valid. Retention then applies per tier: the hot tier no longer
deletes raw chunks (they move), the cold tier drops files past ``cold_retention``.

A file that cannot be read (gone, corrupt) costs the reads of its range that file's samples
and a warning naming it (:mod:`store.read_warnings`); nothing else fails.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.read_warnings import warn
from store.rollup_reads import fetch_rows

if TYPE_CHECKING:
    import pyarrow as pa

    from store.tsdb import TimeSeriesStore

log = logging.getLogger(__name__)

# pyarrow and fsspec are imported where a cold tier is used, not with the store: a store without
# one (the default) would otherwise carry ~35 MiB of pyarrow's libraries in every process.
MOVE_CHUNKS = 100_000  # chunk rows per file (and per move transaction)
ColdRow = tuple[int, int, int, int, int, int, bytes]  # id, series, start, end, n, encoding, blob
_READ = ("id", "series_id", "start_ms", "end_ms", "n", "encoding", "data")


@dataclass(frozen=True)
class MoveResult:
    files: int = 0
    chunks: int = 0
    samples: int = 0
    bytes: int = 0


class ColdTier:
    """Where the files live: an fsspec filesystem and a root path on it."""

    def __init__(self, url: str) -> None:
        import fsspec

        self.url = url
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.fs.makedirs(self.root, exist_ok=True)

    def path(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def write(self, name: str, table: pa.Table) -> int:
        import pyarrow.parquet as pq

        path = self.path(name)
        # Blobs are compressed chunks already: compressing them again costs time for nothing.
        with self.fs.open(path, "wb") as out:
            pq.write_table(table, out, compression={"data": "none", "id": "zstd", "series_id": "zstd",
                                                    "start_ms": "zstd", "end_ms": "zstd", "n": "zstd",
                                                    "encoding": "zstd"}, row_group_size=20_000)
        return int(self.fs.size(path))

    def read(self, name: str, sids: list[int], start_ms: int, end_ms: int) -> list[ColdRow]:
        import pyarrow.parquet as pq

        filters = [("series_id", "in", sids), ("end_ms", ">=", start_ms), ("start_ms", "<=", end_ms)]
        with self.fs.open(self.path(name), "rb") as source:
            table = pq.read_table(source, filters=filters, columns=list(_READ))
        cols = [table.column(c).to_pylist() for c in _READ]
        return list(zip(*cols))

    def remove(self, name: str) -> None:
        try:
            self.fs.rm(self.path(name))
        except FileNotFoundError:
            pass

    def names(self) -> list[str]:
        try:
            return [p.rsplit("/", 1)[-1] for p in self.fs.ls(self.root, detail=False)]
        except FileNotFoundError:
            return []


def move_to_cold(store: TimeSeriesStore, tier: ColdTier, now_ms: int, limit: int = MOVE_CHUNKS) -> MoveResult:
    """Move up to ``limit`` of the oldest chunks past ``cold_after`` into one file."""
    p = store.backend.param
    horizon = now_ms - store.options.cold_after_ms
    rows = fetch_rows(store, f"SELECT id, series_id, start_ms, end_ms, n, encoding, data FROM chunks "
                             f"WHERE end_ms < {p} ORDER BY id LIMIT {int(limit)}", (horizon,))
    if not rows:
        return MoveResult()
    import pyarrow as pa

    schema = pa.schema([
        ("id", pa.int64()), ("series_id", pa.int64()), ("start_ms", pa.int64()), ("end_ms", pa.int64()),
        ("n", pa.int32()), ("encoding", pa.int16()), ("data", pa.binary()),
    ])
    cols = list(zip(*rows))
    table = pa.table([pa.array(c, type=f.type) for c, f in zip(cols[:6], schema)]
                     + [pa.array([bytes(b) for b in cols[6]], type=pa.binary())], schema=schema)
    start, end = min(cols[2]), max(cols[3])
    name = f"chunks-{start}-{end}-{uuid.uuid4().hex[:12]}.parquet"
    size = tier.write(name, table)
    samples = int(sum(cols[4]))
    max_id = max(cols[0])
    with store.lock, store.transaction() as cur:
        cur.execute(f"DELETE FROM chunks WHERE end_ms < {p} AND id <= {p}", (horizon, max_id))
        if cur.rowcount != len(rows):  # something else changed these rows: keep them hot, the file goes
            raise RuntimeError(f"cold tier move: {cur.rowcount} chunk rows deleted where {len(rows)} were written")
        cur.execute(f"INSERT INTO cold_files (path, start_ms, end_ms, chunks, samples, bytes, created_ms) "
                    f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})", (name, start, end, len(rows), samples, size, now_ms))
    log.info("cold tier: %d chunks (%d samples, %d bytes) moved to %s", len(rows), samples, size, tier.path(name))
    return MoveResult(1, len(rows), samples, size)


def tier_cold(store: TimeSeriesStore, tier: ColdTier, now_ms: int) -> MoveResult:
    """Sweep files a crashed move left, move everything past ``cold_after`` (a file of
    :data:`MOVE_CHUNKS` at a time, each written off the store's lock), drop expired files."""
    sweep_orphans(store, tier)
    moved = [move_to_cold(store, tier, now_ms)]
    while moved[-1].files:
        moved.append(move_to_cold(store, tier, now_ms))
    drop_expired(store, tier, now_ms)
    return MoveResult(sum(m.files for m in moved), sum(m.chunks for m in moved), sum(m.samples for m in moved),
                      sum(m.bytes for m in moved))


def sweep_orphans(store: TimeSeriesStore, tier: ColdTier) -> int:
    """Delete files no ``cold_files`` row names: a move that crashed before its commit."""
    named = {str(r[0]) for r in fetch_rows(store, "SELECT path FROM cold_files", ())}
    orphans = [n for n in tier.names() if n.endswith(".parquet") and n not in named]
    for name in orphans:
        tier.remove(name)
    return len(orphans)


def drop_expired(store: TimeSeriesStore, tier: ColdTier, now_ms: int) -> int:
    """The cold tier's retention: files wholly older than ``cold_retention`` (row first: a crash
    then leaves an orphan file, never a row without its file)."""
    p = store.backend.param
    horizon = now_ms - store.options.cold_retention_ms
    expired = fetch_rows(store, f"SELECT id, path FROM cold_files WHERE end_ms < {p}", (horizon,))
    for file_id, name in expired:
        with store.lock, store.transaction() as cur:
            cur.execute(f"DELETE FROM cold_files WHERE id = {p}", (file_id,))
        tier.remove(str(name))
    return len(expired)


def cold_chunks(store: TimeSeriesStore, tier: ColdTier, sids: list[int], start_ms: int, end_ms: int) -> list[ColdRow]:
    """The cold chunks of ``sids`` overlapping [start, end]; an unreadable file is skipped with
    a warning naming it and the range it holds."""
    p = store.backend.param
    files = fetch_rows(store, f"SELECT path, start_ms, end_ms FROM cold_files WHERE end_ms >= {p} AND start_ms <= {p} "
                              f"ORDER BY start_ms", (start_ms, end_ms))
    found: list[ColdRow] = []
    for name, lo, hi in files:
        try:
            found += tier.read(str(name), sids, start_ms, end_ms)
        except Exception as exc:  # gone, truncated, not Parquet: that file's range is missing, no more
            warn(f"partial data: cold tier file {tier.path(str(name))} could not be read ({type(exc).__name__}: "
                 f"{_short(exc)}); samples from {_iso(int(lo))} to {_iso(int(hi))} in it are missing from this answer")
    return found


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:160]


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["ColdTier", "MoveResult", "tier_cold", "move_to_cold", "sweep_orphans", "drop_expired", "cold_chunks"]
