"""What the one-shot commands (query, rules backtest, cost recompute, forecast, report) share:
the configured store opened read-only after checking the schema, and a cost ledger over it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Engine

from cost.changes import CostChanges, apply_changes
from cost.compute import CostCalculator
from cost.ledger import CostLedger
from cost.prices import PriceBook
from infermeter import db
from infermeter.settings import Settings
from promql import SampleSource
from promql.sources import StoreSource
from remote import EngineClient, RemoteReader, RemoteSource
from store.clock import Clock
from store.engine import create_store_engine
from store.interfaces import SeriesReader
from store.reader import Reader
from store.tsdb import TimeSeriesStore

SCHEMA_BEHIND = "the database schema is not at head: run `infermeter db upgrade`"


class SchemaBehind(Exception):
    def __init__(self) -> None:
        super().__init__(SCHEMA_BEHIND)


@dataclass
class ReadSide:
    """What a one-shot command reads: the relational database (``engine``) and the samples,
    from the embedded store opened read-only or from the remote engine (``store.backend``)."""

    engine: Engine
    reader: SeriesReader
    source: SampleSource
    client: EngineClient | None = None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.engine.dispose()


def open_read_only(settings: Settings, clock: Clock) -> ReadSide:
    """The samples and the database, read-only (an embedded store's head rebuilt from its
    write-ahead table); the caller closes it. Raises :class:`SchemaBehind` before reading."""
    engine = create_store_engine(settings.store.url)
    if not db.is_at_head(engine):
        engine.dispose()
        raise SchemaBehind()
    if settings.store.backend == "remote":
        remote = settings.store.remote
        client = EngineClient(remote.query_url, remote.headers, remote.timeout / 1000)
        reader = RemoteReader(client, clock)
        return ReadSide(engine, reader, RemoteSource(client, reader), client)
    store = TimeSeriesStore(engine, clock, settings.store.options(), read_only=True)
    store.open()
    local = Reader(store)
    return ReadSide(engine, local, StoreSource(local))


@contextmanager
def read_only_store(settings: Settings, clock: Clock) -> Iterator[ReadSide]:
    side = open_read_only(settings, clock)
    try:
        yield side
    finally:
        side.close()


def ledger_for(side: ReadSide, settings: Settings, clock: Clock) -> CostLedger:
    """A cost ledger over the samples, priced with the book in effect: the config's prices and
    those changed through the API (writes no series)."""
    book = PriceBook(apply_changes(settings.cost, CostChanges(side.engine, clock).all()))
    return CostLedger(side.engine, CostCalculator(side.reader, book, socket.gethostname()), book, clock)


@contextmanager
def migrated(settings: Settings) -> Iterator[Engine]:
    """The configured database, migrated to head, for commands that write (tokens, markers)."""
    engine = create_store_engine(settings.store.url)
    try:
        db.upgrade(engine)
        yield engine
    finally:
        engine.dispose()
