"""Settled minutes kept for the cost tick (cost.settled_minutes), through a real store on SQLite
and PostgreSQL: the answers must be the reader's own (asked from the overlap before the range),
minute after minute, while samples arrive late, counters reset and restart at a non-zero value,
series come and go and scrapes skip minutes."""

from __future__ import annotations

import numpy as np
import pytest

from cost.compute import CostCalculator
from cost.ledger import HOUR_MS, CostLedger
from cost.settled_minutes import SettledMinutes
from store import ManualClock, TimeSeriesStore
from store.reader import RangeQuery, Reader, SeriesResult
from store.series_index import Selector
from store.types import Sample, SampleBatch, SeriesKey
from tests.conftest import T0, StoreFactory
from tests.cost.test_cost_model import _book, _gpu, _tokens

MINUTE = 60_000
SETTLE = 6 * MINUTE  # the store's 5 min out-of-order window plus a minute, as the service sets it
OVERLAP = 5 * MINUTE  # SettledMinutes' default


class _Fleet:
    """Samples every 15 s (jittered) of three GPUs' utilisation and energy counters, scraped as
    time goes on. n1/0's energy counter starts at 5e9 J, resets at minute 50 and comes back
    from a fresh value; n1/1 skips minutes 30-31 (a scrape gap shorter than the overlap); n2/0
    appears at minute 20 and stops at minute 70; n1/2 is delivered 3 minutes late."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        self.sent_until = T0 - 5 * MINUTE
        self.energy = {"0": 5e9, "1": 0.0, "2": 123.0}
        self.late: list[Sample] = []

    def _keys(self, gpu: str, host: str = "n1") -> tuple[SeriesKey, SeriesKey]:
        labels = {"host": host, "gpu": gpu, "uuid": f"GPU-{host}-{gpu}", "gpu_model": "H100"}
        return SeriesKey.of("gpu_utilization_ratio", labels), SeriesKey.of("gpu_energy_joules_total", labels)

    def scrape_until(self, store: TimeSeriesStore, clock: ManualClock, until_ms: int) -> None:
        t = self.sent_until
        while t < until_ms:
            minute = (t - T0) // MINUTE
            clock.set(t)
            now: list[Sample] = []
            for gpu in ("0", "1", "2"):
                if gpu == "1" and minute in (30, 31):
                    continue
                util, energy = self._keys(gpu)
                burst = self.rng.random() < 0.2
                self.energy[gpu] += (700.0 if burst else 80.0) * 15 * self.rng.uniform(0.5, 1.5)
                if gpu == "0" and minute == 50 and (t - T0) % MINUTE == 0:
                    self.energy[gpu] = 17.0  # the exporter restarted: the counter starts over
                at = t + int(self.rng.integers(-900, 900))
                samples = [Sample(util, at, 1.0 if burst else float(self.rng.uniform(0, 0.3))),
                           Sample(energy, at, self.energy[gpu])]
                (self.late if gpu == "2" else now).extend(samples)
            if 20 <= minute < 70:
                util, energy = self._keys("0", "n2")
                now += [Sample(util, t, 0.5), Sample(energy, t, 1e6 + 100.0 * (t - T0) / 1000)]
            due = [s for s in self.late if s.ts_ms <= t - 3 * MINUTE]
            self.late = [s for s in self.late if s.ts_ms > t - 3 * MINUTE]
            store.append(SampleBatch.from_samples(now + due))
            t += 15_000
        self.sent_until = t


def _table(results: list[SeriesResult]) -> dict[tuple[tuple[str, str], ...], tuple[list[int], list[float]]]:
    return {tuple(sorted(r.labels.items())): (r.ts_ms.tolist(), r.values.tolist()) for r in results}


def _from_overlap(reader: Reader, query: RangeQuery) -> list[SeriesResult]:
    """The reader's answer asked from the overlap before ``query``, cut to its minutes."""
    skip = OVERLAP // MINUTE
    wider = RangeQuery(query.selector, query.start_ms - OVERLAP, query.end_ms, query.step_ms, query.fn)
    return [SeriesResult(r.labels, r.ts_ms[skip:], r.values[skip:], r.source) for r in reader.range(wider)]


def _assert_same(got: list[SeriesResult], want: list[SeriesResult], what: str) -> None:
    g, w = _table(got), _table(want)
    assert g.keys() == w.keys(), what
    for key in w:
        assert g[key][0] == w[key][0], f"{what} {key}: stamps"
        np.testing.assert_allclose(g[key][1], w[key][1], rtol=1e-12, equal_nan=True, err_msg=f"{what} {key}")


@pytest.mark.parametrize("fn", ["increase", "avg"])
def test_every_minute_answers_as_the_reader(make_store: StoreFactory, clock: ManualClock, fn: str) -> None:
    store = make_store()
    reader = Reader(store)
    settled = SettledMinutes(reader, clock, SETTLE)
    fleet = _Fleet()
    metric = "gpu_energy_joules_total" if fn == "increase" else "gpu_utilization_ratio"
    asked = 0
    for minute in range(10, 100):
        end = T0 + minute * MINUTE
        fleet.scrape_until(store, clock, end + 5_000)  # the tick runs 5 s after the minute
        hour = end - end % HOUR_MS
        for start in (hour, end - HOUR_MS, end - 5 * MINUTE):
            if start >= end:
                continue
            query = RangeQuery(Selector(metric), start, end - 1, MINUTE, fn)  # type: ignore[arg-type]
            _assert_same(settled.range(query), _from_overlap(reader, query), f"minute {minute}, from {(start - T0) // MINUTE}")
            asked += (end - start) // MINUTE
    # the late GPU's minutes were never kept before they were complete (the answers agree), and
    # most minutes came from what was kept
    assert settled.minutes_kept > 0.6 * asked
    assert settled.minutes_read < 0.45 * asked


def test_other_queries_go_to_the_reader(make_store: StoreFactory, clock: ManualClock) -> None:
    store = make_store()
    reader = Reader(store)
    settled = SettledMinutes(reader, clock, SETTLE)
    _Fleet().scrape_until(store, clock, T0 + 30 * MINUTE)
    for query in (RangeQuery(Selector("gpu_utilization_ratio"), T0, T0 + 20 * MINUTE, 30_000, "avg"),
                  RangeQuery(Selector("gpu_utilization_ratio"), T0, T0 + 20 * MINUTE, MINUTE, "avg", ("host",)),
                  RangeQuery(Selector("gpu_utilization_ratio"), T0 + 1, T0 + 20 * MINUTE, MINUTE, "avg")):
        _assert_same(settled.range(query), reader.range(query), str(query))
    assert settled.minutes_read == settled.minutes_kept == 0


def test_a_gap_longer_than_the_overlap_is_not_bridged(make_store: StoreFactory, clock: ManualClock) -> None:
    """What the module doc says: a counter's increase across a gap that began in the kept
    minutes counts only when the gap is shorter than the overlap."""
    store = make_store()
    key = SeriesKey.of("gpu_energy_joules_total", {"host": "n1", "gpu": "0"})
    for minute in list(range(0, 20)) + list(range(28, 40)):  # nothing in minutes 20..27: an 8-minute gap
        clock.set(T0 + minute * MINUTE)
        store.append(SampleBatch.from_samples([Sample(key, T0 + minute * MINUTE, 1000.0 * minute)]))
    reader = Reader(store)
    query = RangeQuery(Selector("gpu_energy_joules_total"), T0 + MINUTE, T0 + 39 * MINUTE, MINUTE, "increase")
    direct = reader.range(query)[0].values
    assert direct[27] == pytest.approx(9000.0)  # minute 28: the whole increase across the gap
    for overlap, bridged in ((10 * MINUTE, True), (5 * MINUTE, False)):
        settled = SettledMinutes(reader, clock, SETTLE, overlap_ms=overlap)
        clock.set(T0 + 32 * MINUTE)
        settled.range(RangeQuery(Selector("gpu_energy_joules_total"), T0 + MINUTE, T0 + 26 * MINUTE - 1, MINUTE,
                                 "increase"))  # keeps minutes 1..25; the newer ones are read from 26 - overlap
        clock.set(T0 + 40 * MINUTE)
        values = settled.range(query)[0].values
        np.testing.assert_array_equal(values[:27], direct[:27])
        assert bool(values[27] == pytest.approx(9000.0)) is bridged, overlap
        np.testing.assert_array_equal(values[28:], direct[28:])


def test_bad_settings_are_refused_naming_them(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="overlap_ms whole minutes"):
        SettledMinutes(object(), clock, SETTLE, overlap_ms=90_000)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="settle_ms must be >= 0"):
        SettledMinutes(object(), clock, -1)  # type: ignore[arg-type]


def test_ledger_tick_with_settled_minutes_writes_what_reading_everything_does(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    """Two ledgers tick through 75 minutes on the same store: one reads everything, the other
    keeps settled minutes for the hour in progress and the live series. Their live series and
    their priced hours agree; the closed hour is priced from a full read."""
    store = make_store()
    series = _gpu("n1", "0", 0.8, 300.0) + _gpu("n1", "1", 0.0, 60.0) + _tokens("llama", "n1:8000", 100.0)
    reader = Reader(store)
    book = _book()
    plain = CostLedger(store.engine, CostCalculator(reader, book, "here"), book, clock)
    cached = CostLedger(store.engine, CostCalculator(reader, book, "here"), book, clock,
                        live=CostCalculator(SettledMinutes(reader, clock, SETTLE), book, "here"))
    t = T0 - 5 * MINUTE
    for minute in range(1, 76):
        tick_at = T0 + minute * MINUTE + 5_000
        while t <= tick_at:
            clock.set(t)
            batch = [Sample(key, t, gauge if rate == 0 else rate * (t - T0 + 5 * MINUTE) / 1000)
                     for key, gauge, rate in series]
            store.append(SampleBatch.from_samples(batch))
            t += 15_000
        clock.set(tick_at)
        want = sorted((s.series.name, s.series.labels, s.value) for s in plain.tick())
        hour_rows = plain.spend(T0, T0 + 2 * HOUR_MS, ["hour_ms", "gpu", "component"])
        got = sorted((s.series.name, s.series.labels, s.value) for s in cached.tick())
        assert [(n, lab) for n, lab, _ in got] == [(n, lab) for n, lab, _ in want], minute
        np.testing.assert_allclose([v for *_, v in got], [v for *_, v in want], rtol=1e-9, err_msg=str(minute))
        again = cached.spend(T0, T0 + 2 * HOUR_MS, ["hour_ms", "gpu", "component"])
        assert [(r["hour_ms"], r["gpu"], r["component"]) for r in again] == \
            [(r["hour_ms"], r["gpu"], r["component"]) for r in hour_rows]
        np.testing.assert_allclose([float(r["dollars"]) for r in again], [float(r["dollars"]) for r in hour_rows],
                                   rtol=1e-9)
