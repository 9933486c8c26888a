"""NCCL's "set by environment" lines, PyTorch's environment report and vLLM's EPLB step lines:
parsed in their real shapes, kept as the latest per host, and kept across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from alerts.thresholds import DEFAULT_WATCHED
from collector.nccl import NcclLogSource
from collector.nccl.debug_lines import EnvSetting, parse_line
from collector.nccl.engine_lines import EplbStep, TorchNcclEnvironment
from collector.nccl.engine_lines import parse_line as parse_engine_line
from collector.nccl.lines import parse_any
from store.clock import ManualClock
from tests.drift.nodes import nccl_log


@pytest.mark.parametrize(("line", "name", "value"), [
    ("axa:3048391:3048566 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.", "NCCL_IB_DISABLE", "1"),
    ("gpu01:124172:124172 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to en", "NCCL_SOCKET_IFNAME", "en"),
    ("g:1:1 [3] NCCL INFO NCCL_TOPO_FILE set by environment to /opt/topo v1.xml", "NCCL_TOPO_FILE", "/opt/topo v1.xml"),
    ("g:1:1 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB", "NCCL_NET_GDR_LEVEL", "PHB"),
    ("g:1:1 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to -1.", "NCCL_IB_TIMEOUT", "-1"),
])
def test_env_setting_lines(line: str, name: str, value: str) -> None:
    event = parse_line(line)
    assert isinstance(event, EnvSetting) and (event.name, event.value) == (name, value)


def test_lines_that_only_look_like_settings_are_ignored() -> None:
    for line in ("g:1:1 [0] NCCL INFO  set by environment to eth0",  # no name
                 "g:1:1 [0] NCCL INFO CUDA_VISIBLE_DEVICES set by environment to 0,1",  # not NCCL's
                 "g:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment"):  # no value
        assert not isinstance(parse_line(line), EnvSetting), line


def test_pytorch_environment_report_of_several_generations() -> None:
    older = ("I0527 15:16:51.665462 58626 ProcessGroupNCCL.cpp:878] [PG 0 Rank 2] ProcessGroupNCCL environments: "
             "NCCL version: 2.18.3, TORCH_NCCL_ASYNC_ERROR_HANDLING: 1, TORCH_NCCL_BLOCKING_WAIT: 0, "
             "TORCH_DISTRIBUTED_DEBUG: OFF, TORCH_NCCL_NAN_CHECK: 0")
    event = parse_any(older)
    assert isinstance(event, TorchNcclEnvironment)
    assert event.rank == 2 and event.nccl_version == "2.18.3"
    assert ("TORCH_NCCL_BLOCKING_WAIT", "0") in event.settings and ("TORCH_DISTRIBUTED_DEBUG", "OFF") in event.settings
    newer = parse_any("I20241209 23:39:42.495654 138559122262912 ProcessGroupNCCL.cpp:914] [PG ID 0 PG GUID 0 Rank 1] "
                      "ProcessGroupNCCL environments: NCCL version: 2.20.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 3")
    assert isinstance(newer, TorchNcclEnvironment) and newer.rank == 1
    options = "[PG ID 0 PG GUID 0 Rank 1] ProcessGroupNCCL initialization options: size: 2, global rank: 1"
    assert parse_any(options) is None


def test_eplb_step_lines_old_and_new() -> None:
    new = parse_engine_line("INFO 08-22 17:44:36 [eplb_state.py:301] EPLB step: 12 for model deepseek-v3: "
                            "avg_tokens=812.50, max_tokens=1204, balancedness=0.6748, steps until the next "
                            "rearrangement: 2988")
    assert new == EplbStep("deepseek-v3", 812.5, 1204.0, 0.6748)
    old = parse_engine_line("(VllmWorker rank=0 pid=77) INFO 06-01 10:00:00 [eplb_state.py:300] EPLB step: "
                            "avg_tokens=100.00, max_tokens=250, balancedness=0.4000")
    assert old == EplbStep("", 100.0, 250.0, 0.4)
    assert parse_engine_line("EPLB step: avg_tokens=nan, max_tokens=, balancedness=x") is None


def _software(source: NcclLogSource, at: int) -> dict[tuple[str, str, str], float]:
    result = source.collect_sync(at)
    assert result.health.up, result.health.error
    return {(s.series.name, s.series.get("name") or s.series.get("component"), s.series.get("value")
             or s.series.get("version")): s.value
            for s in result.batch.samples() if s.series.name in ("node_software_info", "nccl_env_info")}


def test_latest_per_host_survives_a_restart_and_an_upgrade(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "r0.log").write_text(nccl_log("node-a", 0))
    state = tmp_path / "state.json"
    first = _software(NcclLogSource([str(logs / "*.log")], state, ManualClock(1_000), host="node-a",
                                    watched=DEFAULT_WATCHED), 1_000)
    assert first[("node_software_info", "nccl", "2.21.5")] == 1.0
    assert first[("nccl_env_info", "NCCL_IB_HCA", "unset")] == 1.0  # watched, never set on this host
    unwatched = NcclLogSource([str(logs / "*.log")], tmp_path / "other.json", ManualClock(1_000), host="node-a")
    assert ("nccl_env_info", "NCCL_IB_HCA", "unset") not in _software(unwatched, 1_000)  # nothing watched: no unset
    restarted = NcclLogSource([str(logs / "*.log")], state, ManualClock(2_000), host="node-a", watched=DEFAULT_WATCHED)
    assert _software(restarted, 2_000) == first  # nothing re-read, nothing forgotten
    with (logs / "r0.log").open("a") as handle:  # the job restarts on an upgraded NCCL
        handle.write("node-a:5100:5100 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
                     "node-a:5100:5100 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1\n")
    after = _software(restarted, 3_000)
    assert ("node_software_info", "nccl", "2.21.5") not in after and after[("node_software_info", "nccl", "2.23.4")]
    assert ("nccl_env_info", "NCCL_IB_HCA", "unset") not in after
    assert after[("nccl_env_info", "NCCL_IB_HCA", "mlx5_0,mlx5_1")] == 1.0
