"""The drift table and version history over a real SQLite store: three nodes, one upgraded within
the range, one with another driver; the table marks exactly the odd cell and the history lists
the upgrade as a change."""

from __future__ import annotations

from pathlib import Path

from drift.table import changes, column_of, drift_table, history, latest, node_of
from infermeter import db
from reports.side_lists import VersionHistory
from store import ManualClock, Reader, StoreOptions, TimeSeriesStore, create_store_engine
from store.types import Sample, SampleBatch, SeriesKey

T0 = 1_800_000_000_000
MIN = 60_000


def _store(path: Path, samples: list[Sample], clock: ManualClock) -> TimeSeriesStore:
    engine = create_store_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    store = TimeSeriesStore(engine, clock, StoreOptions())
    store.open()
    for at in sorted({s.ts_ms for s in samples}):
        clock.set(at)
        store.append(SampleBatch.from_samples([s for s in samples if s.ts_ms == at]))
    return store


def test_history_latest_table_and_changes(tmp_path: Path) -> None:
    samples = []
    for minute in range(0, 60, 1):
        at = T0 + minute * MIN
        for host, driver in (("n1", "550.54.15"), ("n2", "550.54.15"), ("n3", "535.104.05")):
            samples.append(Sample(SeriesKey.of("node_software_info", job="gpu", host=host, component="driver",
                                               version=driver), at, 1.0))
            nccl = "2.23.4" if host == "n2" and minute >= 30 else "2.21.5"  # n2 upgraded NCCL half way
            samples.append(Sample(SeriesKey.of("node_software_info", job="nccl", host=host, component="nccl",
                                               version=nccl), at, 1.0))
        samples.append(Sample(SeriesKey.of("node_software_info", job="vllm", instance="n1:8000", component="engine",
                                           engine="vllm", version="0.10.1"), at, 1.0))
        samples.append(Sample(SeriesKey.of("nccl_env_info", job="nccl", host="n1", name="NCCL_TOPO_FILE",
                                           value="unset"), at, 1.0))
    clock = ManualClock(T0)
    store = _store(tmp_path / "s.db", samples, clock)
    try:
        spans = history(Reader(store), T0, T0 + 59 * MIN)
        lines = VersionHistory(Reader(store))(T0, T0 + 59 * MIN)  # the report's software section
    finally:
        store.close(flush=False)
    upgraded = [s for s in spans if s.node == "n2" and s.column == "nccl"]
    assert [(s.value, round((s.first_ms - T0) / MIN), round((s.last_ms - T0) / MIN)) for s in upgraded] == [
        ("2.21.5", 0, 29), ("2.23.4", 30, 59)]
    [(before, after)] = changes(spans)
    assert (after.node, after.column, before.value, after.value) == ("n2", "nccl", "2.21.5", "2.23.4")
    table = drift_table(latest(spans))
    assert table.columns == ["driver", "nccl", "engine vllm", "NCCL_TOPO_FILE"]
    assert table.rows[("", "n1")] == {"driver": "550.54.15", "nccl": "2.21.5", "engine vllm": "0.10.1",
                                      "NCCL_TOPO_FILE": "unset"}
    # the driver of n3 is odd; n2's newer NCCL is odd too (one of three) -- what the rule names
    assert table.odd == {("", "n3", "driver"), ("", "n2", "nccl")}
    assert table.intended[("", "driver")] == "550.54.15"
    odd = {(v.node, v.component, v.value) for v in lines if v.odd}
    assert odd == {("n3", "driver", "535.104.05"), ("n2", "nccl", "2.23.4")}
    assert [(v.node, v.value, v.replaced) for v in lines if v.replaced] == [("n2", "2.23.4", "2.21.5")]
    assert not any(v.odd for v in lines if v.value == "2.21.5" and v.node == "n2")  # the old value, gone


def test_node_and_column_of_labels() -> None:
    assert node_of({"node": "a", "host": "b"}) == "a"
    assert node_of({"instance": "10.0.0.5:8000"}) == "10.0.0.5"
    assert node_of({"instance": "[::1]:8000"}) == "[::1]:8000"
    assert column_of("nccl_env_info", {"name": "NCCL_IB_HCA", "value": "mlx5_0"}) == ("NCCL_IB_HCA", "mlx5_0")
    assert column_of("node_software_info", {"component": "engine", "engine": "sglang", "version": "0.5.2"}) == \
        ("engine sglang", "0.5.2")
