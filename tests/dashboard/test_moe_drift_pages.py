"""The MoE and Drift pages' reads over a real store holding the synthetic fleet: layer 1 sends three
times its share to expert 0 and nothing to expert 7; node 0 upgraded NCCL half way; with three
nodes, the last one runs another driver."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cost.prices import CostSettings
from dashboard.moe_reads import idle_capacity, imbalance_steps, layer_loads
from dashboard.pages.drift import drift_view
from dashboard.pages.moe import worst_rows
from dashboard.panel import PanelContext
from dashboard.queries import Filters, View
from dashboard.settings import DashboardSettings
from dashboard.sources import Sources
from dashboard.window import HOUR_MS
from drift.table import changes, history
from store import Reader
from tests.dashboard.fleet_store import fleet_store
from tests.dashboard.synthetic import FleetShape, SyntheticFleet

T0 = 1_800_000_000_000


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PanelContext]:
    fleet = SyntheticFleet(FleetShape(nodes=3, gpus_per_node=2), T0 - HOUR_MS, T0)
    with fleet_store(tmp_path_factory.mktemp("moe-page") / "store.db", fleet) as (store, clock):
        yield PanelContext(Sources(clock, Reader(store), CostSettings()), DashboardSettings())


def test_expert_loads_and_the_least_balanced_layer(ctx: PanelContext) -> None:
    view = View(T0, HOUR_MS, Filters())
    loads = layer_loads(ctx, view)
    assert [(ld.model, ld.layer, ld.experts) for ld in loads] == [
        ("llama-3-70b", "0", [str(e) for e in range(8)]), ("llama-3-70b", "1", [str(e) for e in range(8)])]
    even, skewed = loads[0].balance, loads[1].balance
    assert even.max_over_mean == pytest.approx(1.0, abs=0.01)
    assert skewed.utilization[0] == pytest.approx(8 * 3 / 9, rel=0.01) and skewed.utilization[7] == 0
    assert worst_rows(loads)[0][:5] == ["llama-3-70b", "1", "8", worst_rows(loads)[0][3], "2.67"]
    assert worst_rows(loads)[0][6] == "12% (7)"
    assert idle_capacity(loads) == {"llama-3-70b": pytest.approx((0 + (1 - 3 / 8)) / 2, abs=0.01)}
    steps = imbalance_steps(loads[1])
    assert float(max(v for v in steps.values if v == v)) == pytest.approx(8 / 3, rel=0.02)
    assert layer_loads(ctx, View(T0, HOUR_MS, Filters(models=("qwen2-7b",)))) == []  # the model filter applies


def test_drift_table_and_changes(ctx: PanelContext) -> None:
    header, rows, odd = drift_view(history(ctx.sources.reader, T0 - HOUR_MS, T0))
    assert header == ["node", "driver", "nccl", "engine vllm", "TORCH_NCCL_BLOCKING_WAIT"]
    values = {row[0]: row[1:] for row in rows}
    assert set(values) == {"gpu-node-00", "gpu-node-01", "gpu-node-02"}
    assert odd == 2  # node 2's driver, node 0's newer NCCL
    assert getattr(values["gpu-node-02"][0], "children", None) == "535.104.05"  # marked
    assert getattr(values["gpu-node-00"][1], "children", None) == "2.23.4"
    [(before, after)] = changes(history(ctx.sources.reader, T0 - HOUR_MS, T0))
    assert (after.node, after.column, before.value, after.value) == ("gpu-node-00", "nccl", "2.21.5", "2.23.4")
