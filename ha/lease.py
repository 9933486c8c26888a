"""The leader lease: a row a process takes when it is free or expired, and keeps by renewing.

Every decision uses the database's clock (``clock_timestamp()`` on PostgreSQL, ``julianday``
on SQLite), inside the statement that acts on it, so a taken lease is never judged by two
clocks. Taking a lease raises its token; a renewal keeps it only while the row still names
this holder and token, so a holder that paused past its expiry and was replaced finds out at
its next renewal (and its fenced writes fail before that, see :mod:`ha.fence`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import postgresql, sqlite

from ha.schema import ha_lease


@dataclass(frozen=True)
class LeaseInfo:
    holder: str
    token: int
    acquired_ms: int
    expires_ms: int
    now_ms: int  # the database's clock when read

    @property
    def expired(self) -> bool:
        return self.expires_ms <= self.now_ms


def db_now_ms(conn: Connection) -> sa.ColumnElement[int]:
    """The database's current time in ms, as an SQL expression (not the transaction's start)."""
    if conn.dialect.name == "postgresql":
        return sa.cast(sa.func.floor(sa.extract("epoch", sa.func.clock_timestamp()) * 1000), sa.BigInteger)
    return sa.cast((sa.func.julianday("now") - 2440587.5) * 86400000.0, sa.BigInteger)


class LeaseStore:
    def __init__(self, engine: Engine, name: str, duration_ms: int) -> None:
        self.engine = engine
        self.name = name
        self.duration_ms = duration_ms

    def try_acquire(self, holder: str) -> int | None:
        """The new token when ``holder`` took the lease (it was free, expired, or already its
        own), else None. The update is conditional on the token read, so two processes trying at
        once cannot both win."""
        with self.engine.begin() as conn:
            _lock_timeout(conn)
            now = db_now_ms(conn)
            row = conn.execute(sa.select(ha_lease.c.token).where(ha_lease.c.name == self.name)).first()
            if row is None:
                inserted = conn.execute(
                    _insert(conn).values(name=self.name, holder=holder, token=1, acquired_ms=now,
                                         expires_ms=now + self.duration_ms)
                    .on_conflict_do_nothing().returning(ha_lease.c.token)
                ).first()
                return 1 if inserted is not None else None
            taken = conn.execute(
                sa.update(ha_lease)
                .where(ha_lease.c.name == self.name, ha_lease.c.token == row.token,
                       sa.or_(ha_lease.c.expires_ms <= now, ha_lease.c.holder == holder))
                .values(holder=holder, token=ha_lease.c.token + 1, acquired_ms=now, expires_ms=now + self.duration_ms)
                .returning(ha_lease.c.token)
            ).first()
            return int(taken.token) if taken is not None else None

    def renew(self, holder: str, token: int) -> bool:
        """Extends the lease while it is still ``holder``'s under ``token``."""
        with self.engine.begin() as conn:
            _lock_timeout(conn)
            now = db_now_ms(conn)
            done = conn.execute(
                sa.update(ha_lease)
                .where(ha_lease.c.name == self.name, ha_lease.c.holder == holder, ha_lease.c.token == token)
                .values(expires_ms=now + self.duration_ms)
                .returning(ha_lease.c.token)
            ).first()
            return done is not None

    def release(self, holder: str, token: int) -> None:
        """Gives the lease up at once (a clean stop), so the other process need not wait it out."""
        with self.engine.begin() as conn:
            conn.execute(
                sa.update(ha_lease)
                .where(ha_lease.c.name == self.name, ha_lease.c.holder == holder, ha_lease.c.token == token)
                .values(expires_ms=0)
            )

    def read(self, conn: Connection | None = None, lock: bool = False) -> LeaseInfo | None:
        """The lease as stored (``lock``: held against a change of holder until the caller's
        transaction ends; PostgreSQL only, SQLite serialises writers anyway)."""
        if conn is None:
            with self.engine.connect() as own:
                return self.read(own)
        query = sa.select(ha_lease, db_now_ms(conn).label("now_ms")).where(ha_lease.c.name == self.name)
        if lock and conn.dialect.name == "postgresql":
            query = query.with_for_update(read=True)
        row = conn.execute(query).first()
        if row is None:
            return None
        return LeaseInfo(row.holder, int(row.token), int(row.acquired_ms), int(row.expires_ms), int(row.now_ms))


def _lock_timeout(conn: Connection) -> None:
    """Changing the row waits for leader-only transactions that hold it (see :mod:`ha.fence`);
    never for long: a holder stopped inside one is cut off by the server, and we try again."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SET LOCAL lock_timeout = '2s'"))


def _insert(conn: Connection) -> postgresql.Insert | sqlite.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(ha_lease)
    return sqlite.insert(ha_lease)
