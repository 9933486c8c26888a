"""Grafana provisioning: the datasource, the dashboard provider, and the dashboards' JSON.

Every panel query must parse (our rule language's parser, a PromQL subset, and then a real
Prometheus) and name only metrics that exist: the canonical table, dcgm-exporter's names that
infermeter serves on /metrics, the cost and NCCL series infermeter writes, series the exported
rule pack queries, and Prometheus's own ``up`` / ``ALERTS``. Names other than DCGM's and
``ALERTS`` must also be federated by deploy/prometheus.yml, or no panel would ever show them.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from collector.mapping.canonical import CANONICAL, sample_names
from collector.nvml.dcgm_names import FIELDS
from promql import parse
from promql.ast import VectorSelector, walk
from tests.service import free_port

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "deploy" / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
BUILTINS = {"up", "ALERTS"}
DCGM = {f.dcgm for f in FIELDS}
# Sources whose text names the series infermeter writes besides the canonical table.
WRITERS = ["cost/ledger.py", "collector/nccl/metrics.py", "deploy/prometheus/infermeter-rules.yml"]


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("grafana_generate", GRAFANA / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dashboards() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, json.loads(p.read_text())) for p in DASHBOARDS]


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _exprs() -> list[tuple[str, str, str]]:
    """(dashboard, panel title, expression) of every panel target."""
    return [(name, p["title"], t["expr"]) for name, d in _dashboards() for p in _panels(d) for t in p.get("targets", [])]


def concrete(expr: str) -> str:
    """Grafana's variables replaced by what they stand for at query time."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


@cache
def _written() -> str:
    return "\n".join((REPO / w).read_text() for w in WRITERS)


def _known(name: str) -> bool:
    canonical = {s for c in CANONICAL for s in sample_names(c)}
    return (name in canonical or name in DCGM or name in BUILTINS
            or re.search(rf"\b{re.escape(name)}\b", _written()) is not None)


def _federated() -> re.Pattern[str]:
    config = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "infermeter-federate")
    alternatives = []
    for matcher in job["params"]["match[]"]:
        found = re.fullmatch(r'\{__name__=~"(.+)"\}', matcher)
        alternatives.append(found.group(1) if found else re.escape(matcher))
    return re.compile("|".join(f"(?:{a})" for a in alternatives))


def test_datasource_provisioning() -> None:
    data = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert data["apiVersion"] == 1
    prom, ours, engine, fleet = data["datasources"]
    assert (prom["type"], prom["uid"], prom["url"], prom["access"], prom["isDefault"]) == (
        "prometheus", "prometheus", "http://prometheus:9090", "proxy", True)
    assert (ours["type"], ours["uid"], ours["url"], ours["jsonData"]["httpMethod"]) == (
        "prometheus", "infermeter", "http://infermeter:8000", "POST")
    # the fleet profile's engine and its `up` (docker-compose.yml names both services)
    assert (engine["type"], engine["uid"], engine["url"]) == ("prometheus", "engine", "http://victoriametrics:8428")
    assert (fleet["type"], fleet["uid"], fleet["url"]) == ("prometheus", "infermeter-fleet", "http://infermeter-fleet:8001")


def test_every_query_runs_on_infermeter_directly(tmp_path: Path) -> None:
    """The infermeter datasource: every panel and variable query answers 200 from the service's
    own API, by POST as Grafana sends it."""
    from infermeter import db
    from infermeter.settings import GpuSettings, Settings, StoreSettings
    from store import create_store_engine
    from store.clock import ManualClock
    from tests.service import serve

    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = create_store_engine(url)
    db.upgrade(engine)
    engine.dispose()
    problems = []
    with serve(Settings(store=StoreSettings(url=url), gpu=GpuSettings(nvml="off")), ManualClock(1_800_000_000_000)) as (base, _):
        with httpx.Client(base_url=base, timeout=30) as client:
            for name, title, expr in _exprs():
                form = {"query": concrete(expr), "start": "1799996400", "end": "1800000000", "step": "60"}
                reply = client.post("/api/v1/query_range", data=form)
                if reply.status_code != 200 or reply.json().get("status") != "success":
                    problems.append(f"{name} / {title}: {reply.status_code} {reply.text[:200]}")
    assert not problems, "\n".join(problems)


def test_dashboard_provider() -> None:
    data = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "infermeter.yml").read_text())
    assert data["apiVersion"] == 1
    (provider,) = data["providers"]
    assert provider["type"] == "file" and provider["options"]["path"] == "/var/lib/grafana/dashboards"


def test_committed_dashboards_match_the_generator() -> None:
    rendered = _load_generator().render_all()
    assert sorted(rendered) == [p.name for p in DASHBOARDS]
    for path in DASHBOARDS:
        assert path.read_text() == rendered[path.name], f"run: python deploy/grafana/generate.py ({path.name})"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_structure(path: Path) -> None:
    text = path.read_text()
    d = json.loads(text)
    assert "dashboard" not in d and "__inputs" not in d and "${DS_" not in text  # bare, provisionable model
    assert d["uid"] and d["title"].startswith("infermeter /") and d["schemaVersion"] >= 36
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = list(_panels(d))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"{p['title']} overlaps another panel"
        cells |= area
        if p["type"] == "row":
            continue
        assert p["title"] and p["targets"], p
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"] and t["expr"].strip()
            for var in re.findall(r"\$(\w+)", t["expr"]):
                assert var.startswith("__") or var in variables, f"{p['title']}: unknown variable ${var}"


def test_every_query_parses_and_names_existing_metrics() -> None:
    federated = _federated()
    problems = []
    exprs = _exprs()
    assert len(exprs) >= 40
    for name, title, expr in exprs:
        try:
            tree = parse(concrete(expr))
        except Exception as exc:  # the message names the column
            problems.append(f"{name} / {title}: {expr!r} does not parse: {exc}")
            continue
        metrics = {n.name for n in walk(tree) if isinstance(n, VectorSelector) and n.name}
        assert metrics, f"{title}: no metric"
        for metric in metrics:
            if not _known(metric):
                problems.append(f"{name} / {title}: unknown metric {metric}")
            elif metric not in DCGM and metric != "ALERTS" and not federated.fullmatch(metric):
                problems.append(f"{name} / {title}: {metric} is not federated by deploy/prometheus.yml")
    assert not problems, "\n".join(problems)


def test_variable_queries_name_existing_metrics() -> None:
    for name, d in _dashboards():
        for v in d["templating"]["list"]:
            if v["type"] != "query":
                continue
            found = re.fullmatch(r"label_values\((\w+)(\{.*\})?, *(\w+)\)", v["definition"])
            assert found, f"{name}: ${v['name']}: {v['definition']}"
            assert _known(found.group(1)), f"{name}: ${v['name']} reads unknown {found.group(1)}"
            assert v["query"]["query"] == v["definition"]


def test_gpu_dashboard_uses_dcgm_names_only() -> None:
    gpu = [(t, e) for n, t, e in _exprs() if n == "infermeter-gpus-dcgm.json"]
    for title, expr in gpu:
        names = {n.name for n in walk(parse(concrete(expr))) if isinstance(n, VectorSelector)}
        assert names <= DCGM, f"{title}: {names - DCGM}"
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP"} <= {
        n.name for _, e in gpu for n in walk(parse(concrete(e))) if isinstance(n, VectorSelector)}


def test_cost_dashboard_covers_what_finance_watches() -> None:
    cost = " ".join(e for n, _, e in _exprs() if n == "infermeter-cost.json")
    for metric in ("infermeter_cost_per_million_tokens_dollars", "infermeter_budget_cost_per_million_tokens_dollars",
                   "infermeter_cost_dollars_per_hour", "infermeter_idle_cost_dollars_per_hour",
                   "infermeter_spend_period_dollars", "infermeter_budget_spend_period_dollars"):
        assert metric in cost
    fleet = " ".join(e for n, _, e in _exprs() if n == "infermeter-fleet.json")
    for metric in ("inference_generation_tokens_total", "inference_inter_token_latency_seconds_bucket",
                   "inference_time_to_first_token_seconds_bucket", "inference_requests_total", "gpu_utilization_ratio"):
        assert metric in fleet


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus (Debian package prometheus) is installed by the test setup"
    folder = tmp_path_factory.mktemp("prom")
    (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            if process.poll() is not None:
                raise AssertionError(f"prometheus exited: {process.stderr.read().decode() if process.stderr else ''}")
            try:
                if httpx.get(f"{base}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("prometheus did not become ready")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


def test_every_query_parses_in_prometheus(prometheus: str) -> None:
    """The real PromQL parser (Prometheus 2.42) accepts every panel query."""
    problems = []
    with httpx.Client(base_url=prometheus, timeout=10) as client:
        for name, title, expr in _exprs():
            reply = client.post("/api/v1/query", data={"query": concrete(expr)})
            if reply.status_code != 200 or reply.json().get("status") != "success":
                problems.append(f"{name} / {title}: {reply.status_code} {reply.text[:200]}")
    assert not problems, "\n".join(problems)
