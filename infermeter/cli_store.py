"""What the one-shot commands (query, rules backtest, cost recompute, forecast, report) share:
the configured store opened read-only after checking the schema, and a cost ledger over it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from cost.compute import CostCalculator
from cost.ledger import CostLedger
from cost.prices import PriceBook
from infermeter import db
from infermeter.settings import Settings
from store.clock import Clock
from store.engine import create_store_engine
from store.reader import Reader
from store.tsdb import TimeSeriesStore

SCHEMA_BEHIND = "the database schema is not at head: run `infermeter db upgrade`"


class SchemaBehind(Exception):
    def __init__(self) -> None:
        super().__init__(SCHEMA_BEHIND)


def open_read_only(settings: Settings, clock: Clock) -> TimeSeriesStore:
    """The store, opened read-only (the head rebuilt from the write-ahead table); the caller
    disposes ``store.engine``. Raises :class:`SchemaBehind` before reading anything."""
    engine = create_store_engine(settings.store.url)
    if not db.is_at_head(engine):
        engine.dispose()
        raise SchemaBehind()
    store = TimeSeriesStore(engine, clock, settings.store.options(), read_only=True)
    store.open()
    return store


@contextmanager
def read_only_store(settings: Settings, clock: Clock) -> Iterator[TimeSeriesStore]:
    store = open_read_only(settings, clock)
    try:
        yield store
    finally:
        store.engine.dispose()


def ledger_for(store: TimeSeriesStore, settings: Settings, clock: Clock) -> CostLedger:
    """A cost ledger reading the store, priced with the configured book (writes no series)."""
    book = PriceBook(settings.cost)
    return CostLedger(store.engine, CostCalculator(Reader(store), book, socket.gethostname()), book, clock)
