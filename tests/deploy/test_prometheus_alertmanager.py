"""The Prometheus and Alertmanager configs, checked by their own tools (Debian's `prometheus`
and `prometheus-alertmanager`, installed by scripts/ensure-test-tools.sh)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} (Debian package {package}) is installed by the test setup"
    return path


def test_promtool_check_config_and_rules() -> None:
    promtool = _tool("promtool", "prometheus")
    done = subprocess.run([promtool, "check", "config", "deploy/prometheus.yml"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and "1 rule files found" in done.stdout
    rules = subprocess.run([promtool, "check", "rules", "deploy/prometheus/infermeter-rules.yml"], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert rules.returncode == 0, rules.stdout + rules.stderr


def test_prometheus_scrapes_the_service_federation_and_the_worker() -> None:
    config = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"infermeter", "infermeter-federate", "infermeter-worker"}
    worker = jobs["infermeter-worker"]
    assert worker["static_configs"][0]["targets"] == ["worker:8080"] and worker.get("metrics_path", "/metrics") == "/metrics"
    federate = jobs["infermeter-federate"]
    assert federate["metrics_path"] == "/api/v1/federate" and federate["honor_labels"] is True
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]


def test_amtool_check_config() -> None:
    amtool = _tool("amtool", "prometheus-alertmanager")
    done = subprocess.run([amtool, "check-config", "deploy/alertmanager.yml"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_amtool_routes_alerts_of_the_rule_pack() -> None:
    """Every alert of the exported pack has a route (the default receiver at least)."""
    amtool = _tool("amtool", "prometheus-alertmanager")
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "infermeter-rules.yml").read_text())
    names = sorted({r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r})
    assert "CostPerTokenSpike" in names
    for name in ("CostPerTokenSpike", "TargetDown"):
        done = subprocess.run([amtool, "config", "routes", "test", "--config.file=deploy/alertmanager.yml",
                               f"alertname={name}", "severity=critical"], cwd=REPO, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and done.stdout.strip() == "default", done.stdout + done.stderr
