"""The drift rules of the default pack, plain PromQL over the info series the collectors write.

``node_software_info{component, version}`` (NVML: driver, cuda_driver, nvml, vbios per GPU; NCCL
and PyTorch logs: nccl; each engine's own endpoint: engine) and ``nccl_env_info{name, value}``
(NCCL's and PyTorch's settings, ``unset`` where a node lacks a watched one).

A group is the series sharing ``job`` and ``cluster`` (absent labels group together), and, for
versions, the component, the engine and the GPU model (GPUs of another model may rightly carry
another VBIOS). The most common value of a group is taken as the intended one; every series with
another value fires, naming its node and value. When no value is the most common alone (two
nodes, two versions) every node of the tied values fires: there is no intended one to tell.
"""

from __future__ import annotations

import re
from typing import Any

from alerts.thresholds import Thresholds

VERSION_GROUP = "job, cluster, component, engine, gpu_model"
SETTING_GROUP = "job, cluster, name"


def odd_ones(selector: str, group: str, value: str) -> str:
    """The series of ``selector`` whose ``value`` is not their group's most common one; when the
    most common count is shared (two nodes, two versions), every series of the tied values, so the
    answer never depends on how an engine orders ties."""
    counts = f"count by ({group}, {value}) ({selector})"
    top = f"max by ({group}) ({counts})"
    at_top = f"({counts} == on ({group}) group_left() {top})"
    minority = f"({counts} < on ({group}) group_left() {top})"
    tied = f"({at_top} and on ({group}) (count by ({group}) {at_top} > 1))"
    return f"{selector} and on ({group}, {value}) ({minority} or {tied})"


def settings_selector(names: list[str]) -> str:
    alternatives = "|".join(re.escape(n) for n in names) or "^$"
    return f'nccl_env_info{{name=~"{alternatives}"}}'


def alert_rules(t: Thresholds, alert: Any) -> list[dict[str, Any]]:
    node = "{{ if $labels.host }}{{ $labels.host }}{{ else }}{{ $labels.instance }}{{ end }}"
    group = "{{ $labels.job }}{{ if $labels.cluster }} in {{ $labels.cluster }}{{ end }}"
    return [
        alert("NodeSoftwareDrift", odd_ones("node_software_info", VERSION_GROUP, "version"), "warning",
              node + " runs {{ $labels.component }}{{ if $labels.engine }} ({{ $labels.engine }}){{ end }} "
              "{{ $labels.version }}, unlike the rest of " + group, "15m", "0s"),
        alert("NcclSettingDrift", odd_ones(settings_selector(t.drift_nccl_settings), SETTING_GROUP, "value"), "warning",
              node + " has {{ $labels.name }}={{ $labels.value }}, unlike the rest of " + group, "15m", "0s"),
    ]
