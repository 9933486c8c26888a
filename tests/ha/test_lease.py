"""The lease, the elector and the fence against real databases (PostgreSQL and a SQLite file):
one holder at a time, tokens that only grow, expiry by the database's clock, renewals that
fail once the lease moved, and leader-only writes refused unless the lease is ours."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from ha.elector import Elector
from ha.fence import Fence, NotLeader
from ha.lease import LeaseStore
from store import create_store_engine


class Mono:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _table(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS fenced_writes (v INTEGER)"))


def test_one_holder_at_a_time_and_tokens_only_grow(store_url: str) -> None:
    engine = create_store_engine(store_url)
    leases = LeaseStore(engine, "pair", duration_ms=400)
    assert leases.try_acquire("a") == 1
    assert leases.try_acquire("b") is None  # a holds it, not expired
    assert leases.renew("a", 1) and not leases.renew("b", 1) and not leases.renew("a", 2)
    time.sleep(0.5)  # a stops renewing: expired by the database's clock
    info = leases.read()
    assert info is not None and info.expired and info.holder == "a"
    assert leases.try_acquire("b") == 2
    assert not leases.renew("a", 1)  # a's term is over, whatever a thinks
    leases.release("b", 2)  # a clean stop frees it at once
    assert leases.try_acquire("a") == 3
    other = LeaseStore(engine, "another-pair", duration_ms=400)  # pairs sharing a database
    assert other.try_acquire("b") == 1
    engine.dispose()


def test_racing_processes_elect_exactly_one(store_url: str) -> None:
    engine = create_store_engine(store_url, pool_size=10)
    won: list[str] = []
    barrier = threading.Barrier(6)

    def contend(name: str) -> None:
        leases = LeaseStore(engine, "race", duration_ms=5000)
        barrier.wait()
        if leases.try_acquire(name):
            won.append(name)

    threads = [threading.Thread(target=contend, args=(f"p{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1, won
    engine.dispose()


def test_elector_counts_itself_leader_only_while_its_renewals_land(store_url: str) -> None:
    engine = create_store_engine(store_url)
    mono = Mono()
    a = Elector(LeaseStore(engine, "pair", 1000), "a", monotonic=mono)
    b = Elector(LeaseStore(engine, "pair", 1000), "b", monotonic=mono)
    a.step()
    b.step()
    assert a.leading() and not b.leading() and a.term() == 1 and b.term() == 0
    mono.t += 0.8  # past 3/4 of the lease without a renewal: a stops counting itself leader
    assert not a.leading()
    a.step()  # the renewal lands: leader again, same term
    assert a.leading() and a.term() == 1
    a.stop()  # releases
    b.step()
    assert b.leading() and b.term() == 2
    engine.dispose()


def test_fence_refuses_writes_unless_the_lease_is_ours_and_lets_reads_through(pg_url: str) -> None:
    plain = create_store_engine(pg_url)
    _table(plain)
    mono = Mono()
    leases = LeaseStore(plain, "pair", 60_000)
    me = Elector(leases, "me", monotonic=mono)
    fence = Fence(me, leases)
    leader_engine = fence.install(create_store_engine(pg_url))
    with pytest.raises(NotLeader, match="follower"):
        with leader_engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO fenced_writes VALUES (1)"))
    with leader_engine.connect() as conn:  # reads pass
        assert conn.execute(sa.text("SELECT count(*) FROM fenced_writes")).scalar() == 0
    me.step()
    assert me.leading()
    with leader_engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO fenced_writes VALUES (2)"))
        conn.execute(sa.text("INSERT INTO fenced_writes VALUES (3)"))
    assert fence.confirm()
    # Another process takes over (the lease expired while we were paused): our writes fail
    # although this process still believes it leads.
    with plain.begin() as conn:
        conn.execute(sa.text("UPDATE ha_lease SET holder = 'other', token = token + 1"))
    assert me.leading()
    with pytest.raises(NotLeader, match="held by other"):
        with leader_engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO fenced_writes VALUES (4)"))
    assert not fence.confirm()
    with plain.connect() as conn:
        assert sorted(conn.execute(sa.text("SELECT v FROM fenced_writes")).scalars()) == [2, 3]
    leader_engine.dispose()
    plain.dispose()


def test_a_takeover_waits_for_an_open_fenced_write_then_wins(pg_url: str) -> None:
    plain = create_store_engine(pg_url)
    _table(plain)
    leases = LeaseStore(plain, "pair", 300)
    me = Elector(leases, "me")
    fence = Fence(me, leases)
    leader_engine = fence.install(create_store_engine(pg_url))
    me.step()
    other = LeaseStore(plain, "pair", 300)
    result: list[int | None] = []
    with leader_engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO fenced_writes VALUES (1)"))  # holds the lease row
        time.sleep(0.4)  # the lease expires meanwhile
        taker = threading.Thread(target=lambda: result.append(other.try_acquire("other")))
        taker.start()
        time.sleep(0.3)
        assert taker.is_alive()  # waits for our transaction: it cannot take the lease under it
    taker.join(5)
    assert result == [2]
    leader_engine.dispose()
    plain.dispose()
