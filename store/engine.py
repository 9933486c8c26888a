"""Database engines: the SQLite PRAGMAs and the PostgreSQL driver, set once per connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

SqliteSync = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
# Chunk rows are 0.3-1.5 KB: a 4 KiB page holds two to four and leaves up to a fifth of itself
# empty (measured: 18 % of the chunk table's bytes); 16 KiB pages leave ~3 %. SQLite applies the
# page size only to a database that has no tables yet; existing files keep theirs.
SQLITE_PAGE_SIZE = 16_384
SQLITE_AUTOCHECKPOINT_PAGES = 1024  # 16 MiB of WAL between automatic checkpoints (each one syncs)
READER_CACHE_KIB = 8192  # page cache of each SQLite connection (SQLite's default: 2 MiB)
WRITER_CACHE_KIB = 65536  # ... and of the connection that checkpoints (the background's, where one runs)


def create_store_engine(
    url: str,
    *,
    sqlite_synchronous: SqliteSync = "NORMAL",
    busy_timeout_ms: int = 10_000,
    pool_size: int = 5,
    pg_settings: dict[str, str] | None = None,
) -> Engine:
    """An engine for ``sqlite:///path`` or ``postgresql+psycopg://...``.

    SQLite runs in WAL mode so readers never block the writer; ``synchronous=NORMAL`` keeps
    every commit through a process crash (only power loss can drop the newest ones; ``FULL``
    closes that too at the cost of an fsync per commit).
    ``pg_settings``: PostgreSQL session settings for every connection (e.g. a timeout).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
            pool_size=pool_size,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")  # before WAL mode, which fixes it
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sqlite_synchronous}")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            # Readers get a modest page cache: a pool of them at 64 MiB each (dashboards read
            # many chunks) could hold hundreds of MiB. The connection that checkpoints takes the
            # writer's size (:meth:`store.backend.Backend.tune_writer`).
            cur.execute(f"PRAGMA cache_size=-{READER_CACHE_KIB}")
            # Fewer, larger WAL-file checkpoints (16 MiB): each one costs an fsync.
            cur.execute(f"PRAGMA wal_autocheckpoint={SQLITE_AUTOCHECKPOINT_PAGES}")
            cur.close()

        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.get_driver_name() not in ("psycopg", ""):
            raise ValueError(f"PostgreSQL needs the psycopg 3 driver: postgresql+psycopg://..., got {url!r}")
        if parsed.get_driver_name() == "":
            parsed = parsed.set(drivername="postgresql+psycopg")
        options = " ".join(f"-c {name}={value}" for name, value in (pg_settings or {}).items())
        return create_engine(parsed, pool_size=pool_size, pool_pre_ping=True,
                             connect_args={"options": options} if options else {})
    raise ValueError(
        f"unsupported store URL {parsed.render_as_string(hide_password=True)!r}: "
        "use sqlite:///path/to/file.db or postgresql+psycopg://user@host/db"
    )
