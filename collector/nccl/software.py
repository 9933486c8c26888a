"""What the logs say each host runs: its NCCL version and NCCL/PyTorch settings, the latest seen.

Series (``host`` is the host the log lines name, else the collector's own)::

    node_software_info{host, component="nccl", version}   1   "NCCL version 2.27.3+cuda12.9" -> 2.27.3
    nccl_env_info{host, name, value}                       1   "NCCL_X set by environment to Y", and the
                                                               TORCH_NCCL_* values PyTorch reports
    moe_balancedness_sum{model} / moe_balancedness_count{model}  counters of vLLM's EPLB step reports

Only the latest value per (host, component) and (host, name) is kept, so an upgrade replaces the
old version's series (the store keeps its history) instead of reading as drift within one host.
For each *watched* name (the composition root passes the rule pack's list,
``alerts.thresholds.drift_nccl_settings``; none by default) a host that initialised NCCL (or reported PyTorch's settings) but never
showed the name gets ``value="unset"``: a node missing a setting its peers have is exactly what
the drift rule must name. NCCL prints only what the environment sets; PyTorch prints every value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from store.types import Sample, SeriesKey

INFO = "node_software_info"
ENV_INFO = "nccl_env_info"
UNSET = "unset"
_CAP = 4096  # hosts x names remembered; beyond it new ones are ignored


def plain_nccl_version(version: str) -> str:
    """"2.27.3+cuda12.9" -> "2.27.3" (PyTorch prints the bare version; both must compare equal)."""
    return version.split("+", 1)[0]


@dataclass
class SoftwareTable:
    watched: tuple[str, ...] = ()
    versions: dict[tuple[str, str], str] = field(default_factory=dict)  # (host, component) -> version
    env: dict[tuple[str, str], str] = field(default_factory=dict)  # (host, name) -> value
    nccl_hosts: set[str] = field(default_factory=set)  # hosts whose NCCL was seen initialising
    torch_hosts: set[str] = field(default_factory=set)  # hosts whose PyTorch reported its settings

    def version(self, host: str, component: str, version: str) -> None:
        if (host, component) in self.versions or len(self.versions) < _CAP:
            self.versions[(host, component)] = version
            if component == "nccl":
                self.nccl_hosts.add(host)

    def setting(self, host: str, name: str, value: str) -> None:
        if (host, name) in self.env or len(self.env) < _CAP:
            self.env[(host, name)] = value

    def torch_settings(self, host: str, settings: tuple[tuple[str, str], ...]) -> None:
        self.torch_hosts.add(host)
        for name, value in settings:
            self.setting(host, name, value)

    def samples(self, ts_ms: int) -> list[Sample]:
        out = [Sample(SeriesKey.of(INFO, host=h, component=c, version=v), ts_ms, 1.0)
               for (h, c), v in self.versions.items()]
        out += [Sample(SeriesKey.of(ENV_INFO, host=h, name=n, value=v), ts_ms, 1.0) for (h, n), v in self.env.items()]
        for name in self.watched:
            hosts = self.torch_hosts if name.startswith("TORCH_") else self.nccl_hosts
            for host in sorted(hosts):
                if (host, name) not in self.env:
                    out.append(Sample(SeriesKey.of(ENV_INFO, host=host, name=name, value=UNSET), ts_ms, 1.0))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"versions": [[h, c, v] for (h, c), v in self.versions.items()],
                "env": [[h, n, v] for (h, n), v in self.env.items()],
                "nccl_hosts": sorted(self.nccl_hosts), "torch_hosts": sorted(self.torch_hosts)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, watched: tuple[str, ...] = ()) -> SoftwareTable:
        table = cls(watched)
        if not data:
            return table
        table.versions = {(str(h), str(c)): str(v) for h, c, v in data["versions"]}
        table.env = {(str(h), str(n)): str(v) for h, n, v in data["env"]}
        table.nccl_hosts = {str(h) for h in data["nccl_hosts"]}
        table.torch_hosts = {str(h) for h in data["torch_hosts"]}
        return table
