"""Fencing: every transaction of a leader-only part that writes checks, inside itself and before
its first write, that this process still holds the lease under the token it leads with.

The check reads the lease row ``FOR SHARE`` (PostgreSQL), so the other process cannot take the
lease while such a transaction is open: either the write commits under our lease, or the
takeover came first and the write is refused (:class:`NotLeader`). Reads are not fenced: the
follower's API and dashboard read through the same parts. A leader paused inside a fenced
transaction (SIGSTOP) holds that row lock, so the leader-only connections carry
``idle_in_transaction_session_timeout`` (shorter than the lease): the server ends such a
session and the takeover goes ahead.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.sql.elements import TextClause

from ha.elector import Elector
from ha.lease import LeaseInfo, LeaseStore

# In a connection's info: the transaction that passed the check (the object, not a flag, so
# a later transaction on the same pooled connection is checked again whatever happened).
_FENCED = "ha_fenced"


class NotLeader(RuntimeError):
    """A leader-only write refused: this process does not (or no longer) lead."""


class Fence:
    def __init__(self, elector: Elector, leases: LeaseStore) -> None:
        self.elector = elector
        self.leases = leases
        self.refused = 0

    def install(self, engine: Engine) -> Engine:
        """Fences every writing transaction on ``engine`` (one built for leader-only parts)."""
        event.listen(engine, "before_execute", self._before_execute)
        event.listen(engine, "commit", self._done)
        event.listen(engine, "rollback", self._done)
        return engine

    def check(self, conn: Connection) -> None:
        """Raises NotLeader unless the lease, read (and held) in ``conn``'s transaction, is ours."""
        role = self.elector.role()
        if not role.leading:
            self.refused += 1
            raise NotLeader("this process is the follower of its HA pair: leader-only writes are refused")
        info = self.leases.read(conn, lock=True)
        if not self._ours(info, role.token):
            self.refused += 1
            holder = f"{info.holder} (token {info.token})" if info is not None else "nobody"
            raise NotLeader(f"the lease is held by {holder}, not by this process (token {role.token}): write refused")

    def confirm(self) -> bool:
        """Whether the lease is ours right now (read from the database): asked before an action
        outside it, such as sending a notification."""
        role = self.elector.role()
        if not role.leading:
            return False
        try:
            info = self.leases.read()
        except Exception:
            return False
        return self._ours(info, role.token)

    def _ours(self, info: LeaseInfo | None, token: int) -> bool:
        return info is not None and info.holder == self.elector.holder and info.token == token and not info.expired

    def _before_execute(self, conn: Connection, clause: Any, *_: Any) -> None:
        if not _writes(clause):
            return
        transaction = conn.get_transaction()
        if transaction is not None and conn.info.get(_FENCED) is transaction:
            return
        self.check(conn)
        conn.info[_FENCED] = conn.get_transaction()

    @staticmethod
    def _done(conn: Connection) -> None:
        conn.info.pop(_FENCED, None)


def _writes(clause: Any) -> bool:
    if getattr(clause, "is_dml", False):
        return True
    if isinstance(clause, TextClause):
        return clause.text.lstrip().split(None, 1)[0].lower() in ("insert", "update", "delete", "merge")
    return False
