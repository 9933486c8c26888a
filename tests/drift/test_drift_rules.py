"""Drift across three nodes: the collectors report versions and settings, and the default rules
name exactly the node with another driver and the node without TORCH_NCCL_BLOCKING_WAIT=1."""

from __future__ import annotations

from pathlib import Path

from alerts.defaults import default_rule_groups
from alerts.state import FIRING
from store.types import Sample
from tests.alerts.rule_harness import first_firing
from tests.drift.nodes import collect_nodes

GROUPS = [g for g in default_rule_groups() if g.name == "infermeter-drift"]


def _series(samples: list[Sample]) -> dict:  # type: ignore[type-arg]
    return {s.series: (lambda t, v=s.value: v) for s in samples}


def _firing(samples: list[Sample], alert: str) -> list[dict[str, str]]:
    at, engine = first_firing(GROUPS, alert, _series(samples), 20, every_s=60)
    if at is None:
        return []
    return [dict(inst.labels) for rule, inst in engine.active() if rule.name == alert and inst.state == FIRING]


def test_what_the_collectors_report(tmp_path: Path) -> None:
    samples = collect_nodes(tmp_path)
    info = {(s.series.get("host"), s.series.get("component"), s.series.get("version"))
            for s in samples if s.series.name == "node_software_info"}
    assert ("node-a", "driver", "550.54.15") in info
    assert ("node-a", "cuda_driver", "12.4") in info
    assert ("node-a", "nvml", "12.550.54.15") in info
    assert ("node-a", "vbios", "96.00.89.00.01") in info
    assert ("node-a", "nccl", "2.21.5") in info  # "2.21.5+cuda12.4" and PyTorch's "2.21.5" agree
    env = {(s.series.get("host"), s.series.get("name"), s.series.get("value"))
           for s in samples if s.series.name == "nccl_env_info"}
    assert {("node-b", "NCCL_SOCKET_IFNAME", "eth0"), ("node-b", "NCCL_IB_DISABLE", "0"),
            ("node-b", "NCCL_TOPO_FILE", "/etc/nccl/topo.xml"), ("node-b", "TORCH_NCCL_BLOCKING_WAIT", "1"),
            ("node-b", "NCCL_IB_HCA", "unset")} <= env
    eplb = {s.series.name: s.value for s in samples if s.series.get("host") == "" and s.series.name.startswith("moe_")
            and s.series.get("instance") == "node-a" and s.ts_ms == 1_000}
    assert eplb == {"moe_balancedness_sum": 0.6748, "moe_balancedness_count": 1.0}


def test_the_rules_name_exactly_the_odd_nodes(tmp_path: Path) -> None:
    samples = collect_nodes(tmp_path, odd_driver="node-c", unset_blocking_wait="node-b")
    versions = _firing(samples, "NodeSoftwareDrift")
    assert [(a["host"], a["component"], a["version"]) for a in versions] == [("node-c", "driver", "535.104.05")]
    settings = _firing(samples, "NcclSettingDrift")
    assert [(a["host"], a["name"], a["value"]) for a in settings] == [("node-b", "TORCH_NCCL_BLOCKING_WAIT", "0")]


def test_a_node_without_a_setting_its_peers_have_is_named_unset(tmp_path: Path) -> None:
    samples = collect_nodes(tmp_path, no_topo_file="node-a")
    settings = _firing(samples, "NcclSettingDrift")
    assert [(a["host"], a["name"], a["value"]) for a in settings] == [("node-a", "NCCL_TOPO_FILE", "unset")]


def test_a_uniform_fleet_stays_quiet(tmp_path: Path) -> None:
    samples = collect_nodes(tmp_path)
    assert _firing(samples, "NodeSoftwareDrift") == []
    assert _firing(samples, "NcclSettingDrift") == []
