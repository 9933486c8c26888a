"""Processes of :mod:`benchmarks.fleet_bench`: the loopback scrape targets, `infermeter agent`,
vmagent and vmalert (Debian package victoria-metrics), each started on free ports with its own
scratch files, and what each reports about itself."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import yaml

from benchmarks._common import free_port
from benchmarks.scrape_measure import metric_value, running, serving, tail

REPO = Path(__file__).resolve().parent.parent
VMAGENT = "/usr/bin/vmagent"
VMALERT = "/usr/bin/vmalert"


def fmt_ms(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


@dataclass(frozen=True)
class Targets:
    hostports: list[str]
    pid: int

    @property
    def urls(self) -> list[str]:
        return [f"http://{hp}/metrics" for hp in self.hostports]


@contextlib.contextmanager
def targets(count: int, series: int, tmp: Path) -> Iterator[Targets]:
    """``count`` loopback targets (half dcgm-exporter-shaped, half vLLM-shaped) of ``series``
    series each, in one separate process (:mod:`benchmarks.scrape_targets`)."""
    cmd = [sys.executable, "-m", "benchmarks.scrape_targets", "--targets", str(count), "--series", str(series)]
    with running(cmd, tmp / f"targets-{count}.log", REPO, pipe_stdout=True) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            print(tail(tmp / f"targets-{count}.log"))
            raise SystemExit("the target server exited before listening")
        ports: dict[str, list[int]] = json.loads(line)
        # dcgm and vLLM alternate, so any slice of the list is a mix (a node = one of each)
        pairs = [hp for d, v in zip(ports["dcgm"], ports["vllm"]) for hp in (f"127.0.0.1:{d}", f"127.0.0.1:{v}")]
        yield Targets(pairs, proc.pid)


@contextlib.contextmanager
def agent(name: str, urls: list[str], receiver: str, interval_ms: int, engine: str, tmp: Path,
          node: str = "") -> Iterator[tuple[httpx.Client, psutil.Process]]:
    """`infermeter agent` scraping ``urls`` into ``receiver``; yields a client of its own
    /metrics and its process."""
    port = free_port()
    config = {
        "gpu": {"nvml": "off"},
        "worker": {"embedded": False},
        "logging": {"level": "WARNING"},
        "scrape": {"interval": fmt_ms(interval_ms), "timeout": fmt_ms(max(1, interval_ms * 4 // 5)),
                   "targets": [{"job": "fleet", "urls": urls, "engine": engine}]},
        "agent": {"port": port, "queue_dir": str(tmp / f"{name}-queue"), "remote_write": [{"url": receiver}],
                  "external_labels": {"cluster": "bench", **({"node": node} if node else {})}},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(json.dumps(config))
    cmd = [str(REPO / ".venv" / "bin" / "infermeter"), "--config", str(path), "agent", "--port", str(port)]
    with serving(cmd, tmp / f"{name}.log", tmp, port, "/health", f"infermeter agent {name}") as (_, client, ps):
        yield client, ps


def agent_sent(client: httpx.Client) -> float:
    return metric_value(client, "infermeter_agent_samples_sent_total")


@contextlib.contextmanager
def vmagent(hostports: list[str], receiver: str, interval_ms: int, tmp: Path) -> Iterator[tuple[httpx.Client, psutil.Process]]:
    port = free_port()
    config = {"global": {"scrape_interval": fmt_ms(interval_ms), "scrape_timeout": fmt_ms(max(1, interval_ms * 4 // 5))},
              "scrape_configs": [{"job_name": "fleet", "static_configs": [{"targets": hostports}]}]}
    path = tmp / "vmagent.yml"
    path.write_text(json.dumps(config))
    cmd = [VMAGENT, f"-promscrape.config={path}", f"-remoteWrite.url={receiver}",
           f"-remoteWrite.tmpDataPath={tmp / 'vmagent-queue'}", f"-httpListenAddr=127.0.0.1:{port}",
           "-remoteWrite.label=cluster=bench", "-loggerLevel=ERROR"]
    with serving(cmd, tmp / "vmagent.log", tmp, port, "/health", "vmagent") as (_, client, ps):
        yield client, ps


def vmagent_sent(client: httpx.Client) -> float:
    return metric_value(client, "vmagent_remotewrite_block_size_rows_sum")


def vmalert_rules(exported: Path, out: Path, interval_ms: int) -> Path:
    """The exported rule pack as the Debian vmalert reads it (its version predates
    ``keep_firing_for``, which changes when an alert resolves, not what is evaluated), every
    group evaluated every ``interval_ms``."""
    groups = yaml.safe_load(exported.read_text())
    for group in groups["groups"]:
        group["interval"] = fmt_ms(interval_ms)
        for rule in group["rules"]:
            rule.pop("keep_firing_for", None)
    out.write_text(yaml.safe_dump(groups, sort_keys=False))
    return out


@contextlib.contextmanager
def vmalert(rules: Path, engine_url: str, interval_ms: int, tmp: Path) -> Iterator[httpx.Client]:
    port = free_port()
    cmd = [VMALERT, f"-rule={rules}", f"-datasource.url={engine_url}", f"-remoteWrite.url={engine_url}",
           f"-evaluationInterval={fmt_ms(interval_ms)}", f"-httpListenAddr=127.0.0.1:{port}",
           "-notifier.url=http://127.0.0.1:9/", "-loggerLevel=ERROR"]
    with serving(cmd, tmp / "vmalert.log", tmp, port, "/health", "vmalert") as (_, client, _ps):
        yield client


_ITERATION = re.compile(r"^vmalert_iteration_duration_seconds_(sum|count)\{([^}]*)\} (\S+)$")
_GROUP = re.compile(r'group="([^"]+)"')


def vmalert_iterations(client: httpx.Client) -> dict[str, tuple[float, float]]:
    """Per group: (seconds spent evaluating, evaluations) since vmalert started."""
    out: dict[str, list[float]] = {}
    for line in client.get("/metrics").text.splitlines():
        found = _ITERATION.match(line)
        group = _GROUP.search(found.group(2)) if found else None
        if found and group:
            kind, value = found.group(1), found.group(3)
            out.setdefault(group.group(1), [0.0, 0.0])[0 if kind == "sum" else 1] += float(value)
    return {g: (s, n) for g, (s, n) in out.items()}
