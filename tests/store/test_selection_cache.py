"""The index remembers what each selector matched until a series is added: rule cycles ask the
same selectors again and again, and the evaluator's per-list memos need the same objects back.
A series that appears between two cycles must be seen by the next one."""

from __future__ import annotations

import json

import pytest

from promql.evaluate import context_at
from promql.parser import parse
from promql.sources import StoreSource
from promql.vector import Vector
from store import ManualClock, Matcher, Reader, Selector, StoreOptions
from store.series_index import SeriesIndex
from store.types import SeriesKey
from tests.conftest import StoreFactory
from tests.store.test_store import T0, batch, util


def _index(*keys: SeriesKey) -> SeriesIndex:
    index = SeriesIndex()
    index.load((sid, key.name, json.dumps(dict(key.labels))) for sid, key in enumerate(keys, start=1))
    return index


def test_the_same_selector_gets_the_same_objects_until_a_series_is_added() -> None:
    index = _index(util("0"), util("1"), util("0", "node-b"))
    selector = Selector("gpu_util", (Matcher("host", "=", "node-a"),))
    found, sids = index.selection(selector)
    again, sids_again = index.selection(Selector("gpu_util", (Matcher("host", "=", "node-a"),)))
    assert again is found and sids_again is sids  # an equal selector, not only the same object
    assert [k for _, k in found] == [util("0"), util("1")] and sids.tolist() == [1, 2]
    index.load([(4, "gpu_util", json.dumps({"gpu": "2", "host": "node-a"}))])
    fresh, fresh_sids = index.selection(selector)
    assert fresh is not found
    assert [k for _, k in fresh] == [util("0"), util("1"), util("2")] and fresh_sids.tolist() == [1, 2, 4]
    assert [k for _, k in found] == [util("0"), util("1")]  # what was handed out is never changed


def test_a_series_created_by_an_append_is_selected_at_once(make_store: StoreFactory, clock: ManualClock) -> None:
    store = make_store(StoreOptions())
    reader = Reader(store)
    clock.set(T0)
    store.append(batch((util("0"), T0, 1.0), (util("1"), T0, 2.0)))
    assert [k for _, k in reader.select(Selector("gpu_util"))] == [util("0"), util("1")]
    store.append(batch((util("2"), T0 + 15_000, 3.0)))
    assert [k for _, k in reader.select(Selector("gpu_util"))] == [util("0"), util("1"), util("2")]


def test_a_rule_sees_a_new_series_in_the_next_cycle(make_store: StoreFactory, clock: ManualClock) -> None:
    """Through the evaluator: ``used / (used + free)`` (the aligned fast path) and a sum by
    host, a cycle before and a cycle after a new GPU's series appear."""
    store = make_store(StoreOptions())
    source = StoreSource(Reader(store))

    def used(gpu: str) -> SeriesKey:
        return SeriesKey.of("mem_used", gpu=gpu, host="a")

    def free(gpu: str) -> SeriesKey:
        return SeriesKey.of("mem_free", gpu=gpu, host="a")

    ratio = parse("mem_used / (mem_used + mem_free)")
    per_host = parse("sum by (host) (mem_used)")

    def cycle(at: int) -> tuple[dict[str, float], float]:
        ctx = context_at(source, at)
        value = ctx.evaluate(ratio)
        total = ctx.evaluate(per_host)
        assert isinstance(value, Vector) and isinstance(total, Vector)
        return {dict(lab)["gpu"]: float(v) for lab, v in zip(value.labels, value.values)}, float(total.values[0])

    for step in range(3):
        at = T0 + step * 15_000
        clock.set(at)
        store.append(batch((used("0"), at, 1.0), (free("0"), at, 3.0), (used("1"), at, 2.0), (free("1"), at, 2.0)))
    assert cycle(T0 + 30_000) == ({"0": 0.25, "1": 0.5}, 3.0)
    assert cycle(T0 + 30_000) == ({"0": 0.25, "1": 0.5}, 3.0)  # the remembered path answers the same
    at = T0 + 45_000
    clock.set(at)
    store.append(batch((used("0"), at, 1.0), (free("0"), at, 3.0), (used("1"), at, 2.0), (free("1"), at, 2.0),
                       (used("2"), at, 9.0), (free("2"), at, 1.0)))
    got, total = cycle(at)
    assert got == {"0": 0.25, "1": 0.5, "2": 0.9} and total == 12.0


def test_remembered_selections_stay_within_their_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    import store.series_index as series_index

    monkeypatch.setattr(series_index, "SELECTED_IDS_KEPT", 3)
    index = _index(util("0"), util("1"), util("0", "node-b"))
    everything = index.selection(Selector("gpu_util"))[0]  # three ids: the budget
    assert index.selection(Selector("gpu_util"))[0] is everything
    node_b = index.selection(Selector("gpu_util", (Matcher("host", "=", "node-b"),)))[0]  # one more: all forgotten
    assert index.selection(Selector("gpu_util"))[0] is not everything
    assert [k for _, k in node_b] == [util("0", "node-b")]


def test_the_source_keeps_one_label_list_per_selector(make_store: StoreFactory, clock: ManualClock) -> None:
    """The evaluator gets the same label list back while the match list is the same, a new one
    when a series was added, and the old one is let go (one entry per selector)."""
    store = make_store(StoreOptions())
    source = StoreSource(Reader(store))
    clock.set(T0)
    store.append(batch((util("0"), T0, 1.0)))
    first = source.fetch("gpu_util", (), T0 - 60_000, T0).labels
    assert source.fetch("gpu_util", (), T0 - 60_000, T0).labels is first
    store.append(batch((util("1"), T0, 2.0)))
    second = source.fetch("gpu_util", (), T0 - 60_000, T0).labels
    assert second is not first and len(second) == 2
    assert len(source._lists) == 1 and source._lists.held == 2
